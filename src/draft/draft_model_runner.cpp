// DraftModelRunner (see draft_model_runner.h): per call, plan each job (the rows it can reuse,
// the blocks it needs), catch every sequence up in batches of max_batch_tokens, then feed the
// drafts one position at a time for all sequences together.
#include "draft/draft_model_runner.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/check.h"

namespace keel::draft {
namespace {

// The pool's element type: the one asked for when the draft's KV width takes it, else F32.
model::KvLayout runner_layout(const model::Model& draft, const DraftModelConfig& c) {
  model::KvLayout l = model::KvLayout::for_model(draft.hparams(), c.block_size, c.kv_dtype);
  if (!l.validate().ok()) l.dtype = DType::kF32;
  return l;
}

int32_t argmax_row(const float* row, size_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

}  // namespace

Result<std::unique_ptr<DraftModelRunner>> DraftModelRunner::create(const model::Model& draft,
                                                                   const DraftModelConfig& config) {
  if (config.block_size < 1 || config.num_blocks < 1 || config.max_batch_tokens < 1) {
    return Status::invalid_argument(
        "draft model runner: block_size, num_blocks and max_batch_tokens must be >= 1");
  }
  KEEL_ASSIGN_OR_RETURN(model::KvStorage kv,
                        model::KvStorage::create(runner_layout(draft, config), config.num_blocks));
  return std::unique_ptr<DraftModelRunner>(new DraftModelRunner(draft, config, std::move(kv)));
}

DraftModelRunner::DraftModelRunner(const model::Model& draft, const DraftModelConfig& config,
                                   model::KvStorage kv)
    : model_(draft), config_(config), kv_(std::move(kv)), ctx_(draft, config.max_batch_tokens) {
  free_.reserve(static_cast<size_t>(config.num_blocks));
  for (int32_t b = config.num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

void DraftModelRunner::free_blocks(Seq& s) {
  free_.insert(free_.end(), s.blocks.rbegin(), s.blocks.rend());
  s.blocks.clear();
  s.fed.clear();
}

void DraftModelRunner::release(int64_t seq_id) {
  const auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  free_blocks(it->second);
  seqs_.erase(it);
}

bool DraftModelRunner::hold_blocks(Seq& s, size_t blocks) {
  while (s.blocks.size() > blocks) {
    free_.push_back(s.blocks.back());
    s.blocks.pop_back();
  }
  if (free_.size() < blocks - s.blocks.size()) {  // is there enough to take?
    size_t available = free_.size();
    for (const auto& [id, other] : seqs_) {
      if (other.last_call != call_) available += other.blocks.size();
    }
    if (available < blocks - s.blocks.size()) return false;
  }
  while (free_.size() < blocks - s.blocks.size()) {
    // The least recently used sequence this call does not name, holding blocks.
    auto victim = seqs_.end();
    for (auto it = seqs_.begin(); it != seqs_.end(); ++it) {
      if (it->second.last_call == call_ || it->second.blocks.empty()) continue;
      if (victim == seqs_.end() || it->second.last_call < victim->second.last_call) victim = it;
    }
    KEEL_CHECK(victim != seqs_.end());  // counted above
    free_blocks(victim->second);
    seqs_.erase(victim);
  }
  while (s.blocks.size() < blocks) {
    s.blocks.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

Status DraftModelRunner::run(const model::Batch& batch, const std::vector<Plan*>& owners,
                             kernels::Ops& ops) {
  KEEL_TRY(ctx_.forward(batch, kv_, ops, &logits_));
  num_fed_ += static_cast<int64_t>(batch.size());
  const auto n_vocab = static_cast<size_t>(model_.hparams().n_vocab);
  KEEL_CHECK(logits_.size() == owners.size() * n_vocab);
  for (size_t r = 0; r < owners.size(); ++r) {
    owners[r]->job->drafts.push_back(argmax_row(logits_.data() + r * n_vocab, n_vocab));
  }
  return Status();
}

Status DraftModelRunner::catch_up(std::vector<Plan>& plans, kernels::Ops& ops) {
  // Every plan's positions [from, n) in plan order, the last with logits; a plan may straddle
  // two batches (a long prompt), each batch naming it once.
  model::Batch batch;
  std::vector<Plan*> owners;
  int32_t seq = -1;
  for (Plan& p : plans) {
    const std::span<const int32_t> t = p.job->tokens;
    const auto n = static_cast<int32_t>(t.size());
    seq = -1;
    for (int32_t pos = p.from; pos < n; ++pos) {
      if (std::ssize(batch.tokens) == config_.max_batch_tokens) {
        KEEL_TRY(run(batch, owners, ops));
        batch = model::Batch();
        owners.clear();
        seq = -1;
      }
      if (seq < 0) seq = batch.add_seq(p.seq->blocks);
      const bool last = pos + 1 == n;
      batch.add(t[static_cast<size_t>(pos)], pos, seq, last);
      if (last) owners.push_back(&p);
    }
  }
  if (!batch.empty()) KEEL_TRY(run(batch, owners, ops));
  return Status();
}

Status DraftModelRunner::extend(std::vector<Plan>& plans, kernels::Ops& ops) {
  // Draft i + 1 of every plan that wants it: feed draft i at position n − 1 + i.
  for (size_t have = 1;; ++have) {
    model::Batch batch;
    std::vector<Plan*> owners;
    bool any = false;
    for (Plan& p : plans) {
      if (p.job->drafts.size() != have || std::cmp_greater_equal(have, p.k)) continue;
      any = true;
      if (std::ssize(batch.tokens) == config_.max_batch_tokens) {
        KEEL_TRY(run(batch, owners, ops));
        batch = model::Batch();
        owners.clear();
      }
      const auto pos = static_cast<int32_t>(p.job->tokens.size() - 1 + have);
      batch.add(p.job->drafts.back(), pos, batch.add_seq(p.seq->blocks), true);
      owners.push_back(&p);
    }
    if (!any) return Status();
    if (!batch.empty()) KEEL_TRY(run(batch, owners, ops));
  }
}

Status DraftModelRunner::draft(std::span<DraftJob> jobs, kernels::Ops& ops) {
  ++call_;
  for (DraftJob& j : jobs) {
    j.drafts.clear();
    seqs_[j.seq_id].last_call = call_;
  }
  const int64_t n_ctx = model_.n_ctx();
  const auto bs = static_cast<int64_t>(config_.block_size);
  std::vector<Plan> plans;
  for (DraftJob& j : jobs) {
    Seq& s = seqs_.at(j.seq_id);
    const auto n = static_cast<int64_t>(j.tokens.size());
    // Fed positions reach n − 1 + (k − 1), which must stay below the draft's context.
    const auto k = static_cast<int32_t>(std::min<int64_t>(j.k, n_ctx - n + 1));
    if (n == 0 || k <= 0) continue;
    // The rows to keep: the longest common prefix, leaving at least the last token to feed.
    const auto same = static_cast<int32_t>(
        std::mismatch(s.fed.begin(), s.fed.end(), j.tokens.begin(), j.tokens.end() - 1).first -
        s.fed.begin());
    s.fed.resize(static_cast<size_t>(same));
    if (!hold_blocks(s, static_cast<size_t>((n + k - 1 + bs - 1) / bs))) {
      free_blocks(s);  // it does not fit: no drafts, and its rows make room for the others
      continue;
    }
    plans.push_back(Plan{&j, &s, same, k});
  }
  Status st = catch_up(plans, ops);
  if (st.ok()) st = extend(plans, ops);
  for (Plan& p : plans) {
    if (!st.ok()) {
      p.job->drafts.clear();
      p.seq->fed.clear();
      continue;
    }
    // Its rows now hold the tokens and every draft but the last.
    p.seq->fed.assign(p.job->tokens.begin(), p.job->tokens.end());
    p.seq->fed.insert(p.seq->fed.end(), p.job->drafts.begin(), p.job->drafts.end() - 1);
  }
  return st;
}

}  // namespace keel::draft
