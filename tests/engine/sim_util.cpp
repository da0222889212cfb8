// Test doubles for the scheduler (see sim_util.h).
#include "sim_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

namespace keel::engine::testing {
namespace {

constexpr int32_t kUnwritten = -2;

}  // namespace

int32_t next_token(std::span<const int32_t> context, int32_t vocab) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a over the context
  for (int32_t t : context) {
    h ^= static_cast<uint32_t>(t);
    h *= 1099511628211ULL;
  }
  return static_cast<int32_t>((h >> 17) % static_cast<uint64_t>(vocab));
}

std::vector<int32_t> reference_output(std::vector<int32_t> prompt, int32_t max_tokens,
                                      int32_t vocab, int32_t eos) {
  std::vector<int32_t> out;
  while (static_cast<int32_t>(out.size()) < max_tokens) {
    const int32_t t = next_token(prompt, vocab);
    out.push_back(t);
    prompt.push_back(t);
    if (t == eos) break;
  }
  return out;
}

void expect_valid_plan(const StepPlan& plan, const SchedulerConfig& config, int32_t block_size) {
  EXPECT_LE(plan.num_tokens(), config.max_batched_tokens);
  std::set<RequestKey> keys;
  const ScheduledSeq* prev = nullptr;
  for (const ScheduledSeq& s : plan.seqs) {
    // A request's second seq must directly follow its PIC recompute seq (positions given).
    const bool tail_after_relink =
        prev != nullptr && prev->key == s.key && !prev->positions.empty() && s.positions.empty();
    EXPECT_TRUE(keys.insert(s.key).second || tail_after_relink)
        << "request " << s.key << " twice in a plan";
    prev = &s;
    EXPECT_GE(s.num_tokens, 1);
    EXPECT_GE(s.start_pos, 0);
    EXPECT_EQ(s.tokens.size(), static_cast<size_t>(s.num_tokens));
    EXPECT_GE(static_cast<int64_t>(s.block_table.size()) * block_size,
              static_cast<int64_t>(s.start_pos) + s.num_tokens);
  }
  EXPECT_LE(keys.size(), static_cast<size_t>(config.max_num_seqs));
}

FakeKvModel::FakeKvModel(int32_t num_blocks, int32_t block_size, int32_t vocab)
    : block_size_(block_size),
      vocab_(vocab),
      rows_(static_cast<size_t>(num_blocks) * block_size, kUnwritten) {}

std::vector<SeqResult> FakeKvModel::execute(const StepPlan& plan) {
  const auto row = [&](const ScheduledSeq& s, int32_t pos) -> int32_t* {
    const size_t idx = static_cast<size_t>(pos / block_size_);
    if (idx >= s.block_table.size()) return nullptr;
    return &rows_[static_cast<size_t>(s.block_table[idx]) * block_size_ + pos % block_size_];
  };
  for (const kv::EvictedCachedBlock& e : plan.demotions) {
    if (tiers_ == nullptr) continue;
    std::vector<std::byte> payload(payload_bytes());
    std::memcpy(payload.data(), &rows_[static_cast<size_t>(e.block) * block_size_], payload.size());
    tiers_->demote(e.hash, payload);
  }
  for (const auto& [src, dst] : plan.copies) {
    ++num_copies_;
    std::copy_n(rows_.begin() + static_cast<ptrdiff_t>(src) * block_size_, block_size_,
                rows_.begin() + static_cast<ptrdiff_t>(dst) * block_size_);
  }
  for (const Promotion& p : plan.promotions) {
    std::memcpy(&rows_[static_cast<size_t>(p.block) * block_size_], p.payload.data(),
                payload_bytes());
  }
  for (const ScheduledSeq& s : plan.seqs) {
    for (int32_t i = 0; i < s.num_tokens; ++i) {
      int32_t* r = row(s, s.start_pos + i);
      if (r == nullptr || s.tokens[i] == kPlaceholderToken) {
        ++num_errors_;
        continue;
      }
      *r = s.tokens[i];
    }
  }
  std::vector<SeqResult> results;
  for (const ScheduledSeq& s : plan.seqs) {
    if (!s.samples) continue;
    std::vector<int32_t> context;
    for (int32_t p = 0; p < s.start_pos + s.num_tokens; ++p) {
      const int32_t* r = row(s, p);
      if (r == nullptr || *r == kUnwritten) {
        ++num_errors_;
        context.push_back(kUnwritten);
      } else {
        context.push_back(*r);
      }
    }
    results.push_back(SeqResult{s.key, next_token(context, vocab_)});
  }
  return results;
}

SimEngine::SimEngine(Scheduler* scheduler, FakeKvModel* model, int32_t eos, bool schedule_ahead)
    : scheduler_(scheduler), model_(model), eos_(eos), ahead_(schedule_ahead) {}

void SimEngine::submit(const SimRequest& request) {
  scheduler_->add(request.key, request.prompt, request.max_tokens, request.extra_key);
  max_tokens_[request.key] = request.max_tokens;
  outputs_[request.key];
  active_.insert(request.key);
}

void SimEngine::abort(RequestKey key) {
  scheduler_->abort(key);
  active_.erase(key);
}

void SimEngine::deliver(std::span<const SeqResult> results) {
  for (const SeqResult& r : results) {
    if (!active_.contains(r.key)) continue;  // finished at an earlier step: discarded
    std::vector<int32_t>& out = outputs_[r.key];
    out.push_back(r.token);
    if (r.token == eos_ || static_cast<int32_t>(out.size()) >= max_tokens_[r.key]) {
      scheduler_->finish(r.key);
      active_.erase(r.key);
      finished_.insert(r.key);
    }
  }
}

bool SimEngine::step() {
  if (!have_pending_) {
    if (!scheduler_->has_requests()) return false;
    if (before_schedule) before_schedule();
    pending_ = scheduler_->schedule();
    if (on_plan) on_plan(pending_);
    have_pending_ = true;
  }
  for (const ScheduledSeq& s : pending_.seqs) {
    // (An abort may land between resolve_plan() and execution; its result is then discarded.)
    EXPECT_FALSE(finished_.contains(s.key)) << "finished request " << s.key << " is executed";
  }
  const std::vector<SeqResult> results = model_->execute(pending_);
  StepPlan next;
  const bool have_next = ahead_ && scheduler_->has_requests();
  if (have_next) {  // planned while the step "runs", before its update
    if (before_schedule) before_schedule();
    next = scheduler_->schedule();
    if (on_plan) on_plan(next);
  }
  scheduler_->update(pending_, results);
  if (on_update) on_update();
  deliver(results);
  if (have_next) {
    scheduler_->resolve_plan(&next);
    pending_ = std::move(next);
  } else {
    have_pending_ = false;
  }
  ++num_steps_;
  return true;
}

void SimEngine::run(int max_steps) {
  while (step()) {
    if (num_steps_ > max_steps) {
      ADD_FAILURE() << "no completion after " << max_steps << " steps; " << active_.size()
                    << " requests left";
      return;
    }
  }
  EXPECT_TRUE(active_.empty());
}

std::vector<RequestKey> run_in_order(Scheduler& sched,
                                     const std::vector<std::unique_ptr<RequestState>>& states,
                                     int max_steps) {
  std::vector<RequestKey> order;
  for (int step = 0; step < max_steps && sched.has_requests(); ++step) {
    StepPlan plan = sched.schedule();
    std::vector<SeqResult> results;
    for (const ScheduledSeq& s : plan.seqs) {
      if (order.empty() || order.back() != s.key) order.push_back(s.key);
      if (s.samples) results.push_back(SeqResult{s.key, 7});
    }
    sched.update(plan, results);
    for (const auto& r : states) {
      const RequestState* st = sched.find(r->key);
      if (st != nullptr && st->num_generated() >= st->max_tokens) sched.finish(r->key);
    }
  }
  return order;
}

}  // namespace keel::engine::testing
