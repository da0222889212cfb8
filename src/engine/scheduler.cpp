// Scheduler implementation (see scheduler.h for the policy). Thread safety: engine thread only.
#include "engine/scheduler.h"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "core/check.h"

namespace keel::engine {
namespace {

std::string key_str(RequestKey key) { return "request " + std::to_string(key); }

}  // namespace

Status SchedulerConfig::validate() const {
  if (max_num_seqs < 1) {
    return Status::invalid_argument("scheduler: max_num_seqs must be ≥ 1, got " +
                                    std::to_string(max_num_seqs));
  }
  if (max_batched_tokens < 1) {
    return Status::invalid_argument("scheduler: max_batched_tokens must be ≥ 1, got " +
                                    std::to_string(max_batched_tokens));
  }
  if (max_batched_tokens < max_num_seqs) {
    return Status::invalid_argument("scheduler: max_batched_tokens (" +
                                    std::to_string(max_batched_tokens) +
                                    ") must be ≥ max_num_seqs (" + std::to_string(max_num_seqs) +
                                    ") so that every running request can decode each step");
  }
  if (long_prefill_reserve < -1 || long_prefill_reserve >= max_batched_tokens) {
    return Status::invalid_argument("scheduler: long_prefill_reserve must be -1 (auto) or in [0, " +
                                    std::to_string(max_batched_tokens) + "), got " +
                                    std::to_string(long_prefill_reserve));
  }
  if (max_waiting < 1) {
    return Status::invalid_argument("scheduler: max_waiting must be ≥ 1, got " +
                                    std::to_string(max_waiting));
  }
  if (max_model_len < 0) {
    return Status::invalid_argument("scheduler: max_model_len must be ≥ 0, got " +
                                    std::to_string(max_model_len));
  }
  return programs.validate();
}

Scheduler::Scheduler(const SchedulerConfig& config, kv::KvCacheManager* kv)
    : config_(config), kv_(kv) {
  KEEL_CHECK_MSG(config.validate().ok(), "invalid SchedulerConfig");
  KEEL_CHECK(kv != nullptr);
}

Status Scheduler::validate_request(size_t num_prompt_tokens, int32_t max_tokens) const {
  if (num_prompt_tokens == 0) return Status::invalid_argument("the prompt is empty");
  if (max_tokens < 1) {
    return Status::invalid_argument("max_tokens must be ≥ 1, got " + std::to_string(max_tokens));
  }
  const int64_t total = static_cast<int64_t>(num_prompt_tokens) + max_tokens;
  if (config_.max_model_len > 0 && total > config_.max_model_len) {
    return Status::out_of_range("prompt (" + std::to_string(num_prompt_tokens) +
                                " tokens) + max_tokens (" + std::to_string(max_tokens) +
                                ") exceeds the context length " +
                                std::to_string(config_.max_model_len));
  }
  // Every position but the last generated token's holds KV at some point.
  const int32_t blocks = kv_->blocks_for(total - 1);
  if (blocks > kv_->num_blocks()) {
    return Status::out_of_range("the request needs " + std::to_string(blocks) +
                                " KV blocks, the whole pool has " +
                                std::to_string(kv_->num_blocks()));
  }
  return Status::ok_status();
}

void Scheduler::add(RequestKey key, std::vector<int32_t> prompt, int32_t max_tokens,
                    kv::BlockHash extra_key, PicState pic) {
  auto r = std::make_unique<RequestState>();
  r->key = key;
  r->num_prompt_tokens = static_cast<int32_t>(prompt.size());
  r->tokens = std::move(prompt);
  r->max_tokens = max_tokens;
  r->extra_key = extra_key;
  r->pic = std::move(pic);
  add(r.get());
  owned_.emplace(key, std::move(r));
}

void Scheduler::add(RequestState* r) {
  KEEL_CHECK_MSG(validate_request(r->tokens.size(), r->max_tokens).ok(),
                 "Scheduler::add of a request that validate_request() rejects");
  KEEL_CHECK_MSG(!requests_.contains(r->key), "Scheduler::add of a key already in use");
  KEEL_CHECK_MSG(r->phase == RequestPhase::kWaiting && r->num_scheduled == 0 &&
                     r->num_prompt_tokens == r->num_tokens(),
                 "Scheduler::add of a request that is not new");
  KEEL_CHECK(r->pic.chunks.size() == r->pic.sources.size());
  requests_.emplace(r->key, r);
  if (!tenant_waiting(r->tenant)) {
    const std::vector<std::string_view> backlogged = waiting_tenants();
    vtc_arrive(&vtc_, r->tenant, backlogged);
  }
  r->arrived_at = programs_.served;
  waiting_.push_back(r->key);
}

void Scheduler::set_exact_limit(RequestKey key, int32_t limit) { state(key).exact_limit = limit; }

void Scheduler::release_pages(RequestKey key, std::span<const int32_t> pages) {
  const auto it = requests_.find(key);
  if (it == requests_.end() || it->second->phase != RequestPhase::kRunning) return;
  for (int32_t page : pages) kv_->release_block(key, page);
}

void Scheduler::abort(RequestKey key) { remove(key); }

void Scheduler::finish(RequestKey key) { remove(key); }

void Scheduler::retain(RequestKey key) {
  if (!requests_.contains(key)) return;
  remove(key, /*keep_blocks=*/true);
  retained_[key] = 1;
}

bool Scheduler::acquire_retained(RequestKey key) {
  const auto it = retained_.find(key);
  if (it == retained_.end()) return false;
  ++it->second;
  return true;
}

void Scheduler::release_retained(RequestKey key) {
  const auto it = retained_.find(key);
  if (it == retained_.end() || --it->second > 0) return;
  retained_.erase(it);
  kv_->free(key);
}

void Scheduler::remove(RequestKey key, bool keep_blocks) {
  const auto it = requests_.find(key);
  if (it == requests_.end()) return;
  if (it->second->phase == RequestPhase::kWaiting) {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), key));
  } else if (it->second->phase == RequestPhase::kPopulating) {  // its reads' result is dropped
    populating_.erase(std::find(populating_.begin(), populating_.end(), key));
  } else {
    running_.erase(std::find(running_.begin(), running_.end(), key));
  }
  if (!keep_blocks) kv_->free(key);
  for (RequestKey src : it->second->pic.sources) release_retained(src);  // never linked
  requests_.erase(it);
  owned_.erase(key);
}

const RequestState* Scheduler::find(RequestKey key) const {
  const auto it = requests_.find(key);
  return it == requests_.end() ? nullptr : it->second;
}

RequestState& Scheduler::state(RequestKey key) {
  const auto it = requests_.find(key);
  KEEL_CHECK_MSG(it != requests_.end(), "scheduler queue holds an unknown request");
  return *it->second;
}

int32_t Scheduler::tokens_wanted(const RequestState& r) const {
  // Done (the caller will finish it): its last allowed token is sampled or being sampled.
  if (r.num_generated() + r.num_pending_samples >= r.max_tokens) return 0;
  // Speculating: the next decode drafts from every token, so it waits for the pending sample.
  if (r.spec.enabled() && r.num_pending_samples > 0) return 0;
  int32_t want = r.effective_len() - r.num_scheduled;
  if (config_.max_model_len > 0) want = std::min(want, config_.max_model_len - r.num_scheduled);
  return std::max(want, 0);
}

void Scheduler::set_tiers(kv::KvTiers* tiers, size_t payload_bytes, TierTransfer* transfer) {
  tiers_ = tiers != nullptr && !tiers->empty() ? tiers : nullptr;
  KEEL_CHECK_MSG(tiers_ == nullptr || transfer != nullptr, "KV tiers need a transfer thread");
  payload_bytes_ = payload_bytes;
  transfer_ = transfer;
}

void Scheduler::finish_populating(StepBuilder& b) {
  if (tiers_ == nullptr) return;
  const int32_t bs = kv_->block_size();
  for (TierTransfer::Done& d : transfer_->poll()) {
    const auto it = requests_.find(d.key);
    if (it == requests_.end() || it->second->phase != RequestPhase::kPopulating) continue;
    RequestState& r = *it->second;
    const std::span<const kv::BlockId> table = kv_->block_table(r.key);
    const auto fetched = static_cast<int32_t>(d.promotions.size());
    for (int32_t i = 0; i < fetched; ++i) {
      d.promotions[static_cast<size_t>(i)].block =
          table[static_cast<size_t>(r.tier_first_block + i)];
      b.plan.promotions.push_back(std::move(d.promotions[static_cast<size_t>(i)]));
    }
    tier_blocks_fetched_ += fetched;
    tier_blocks_recomputed_ += r.tier_chain_blocks - fetched;  // unreadable: recomputed
    const int32_t start = r.tier_hit_tokens + fetched * bs;
    if (!r.admitted_once) {
      r.admitted_once = true;
      r.num_cached_tokens = start;
      kv_->record_prefix_query(r.num_tokens(), start);
    }
    r.num_computed = start;
    r.num_scheduled = start;
    r.phase = RequestPhase::kRunning;
    populating_.erase(std::find(populating_.begin(), populating_.end(), r.key));
    running_.push_back(r.key);
  }
}

StepPlan Scheduler::schedule() {
  StepBuilder b;
  b.plan.step_id = next_step_id_++;
  b.budget = config_.max_batched_tokens;
  finish_populating(b);
  schedule_running(b);
  if (b.plan.preempted.empty()) schedule_waiting(b);
  b.plan.seqs = std::move(b.decodes);
  for (ScheduledSeq& s : b.prefills) b.plan.seqs.push_back(std::move(s));
  if (tiers_ != nullptr) b.plan.demotions = kv_->take_evictions();
  return std::move(b.plan);
}

void Scheduler::extend_plan(StepPlan* plan) {
  if (!plan->preempted.empty()) return;
  StepBuilder b;
  int32_t decodes = 0, prompt = 0;
  for (const ScheduledSeq& s : plan->seqs) (s.is_decode() ? decodes : prompt) += s.num_tokens;
  b.budget = config_.max_batched_tokens - decodes - prompt;
  if (b.budget <= 0) return;
  b.plan = std::move(*plan);
  extend_decodes(b);
  b.prefill_left = decodes > 0 || !b.decodes.empty() ? prefill_budget_ - prompt
                                                     : std::numeric_limits<int32_t>::max();
  if (b.prefill_left > 0 && !waiting_.empty()) schedule_waiting(b);
  // The added decodes go after the plan's decodes, before its prefill chunks.
  const auto first_prefill = std::find_if(b.plan.seqs.begin(), b.plan.seqs.end(),
                                          [](const ScheduledSeq& s) { return !s.is_decode(); });
  b.plan.seqs.insert(first_prefill, std::make_move_iterator(b.decodes.begin()),
                     std::make_move_iterator(b.decodes.end()));
  for (ScheduledSeq& s : b.prefills) b.plan.seqs.push_back(std::move(s));
  if (tiers_ != nullptr) {
    for (const kv::EvictedCachedBlock& e : kv_->take_evictions()) b.plan.demotions.push_back(e);
  }
  *plan = std::move(b.plan);
}

std::vector<kv::BlockHash> Scheduler::tier_chain(const RequestState& r,
                                                 const kv::KvCacheManager::PrefixHit& hit,
                                                 int32_t* recomputed) const {
  std::vector<kv::BlockHash> chain;
  std::vector<kv::TierKind> where;
  *recomputed = 0;
  const int32_t bs = kv_->block_size();
  if (tiers_ == nullptr || !kv_->prefix_cache_enabled() || hit.num_tokens % bs != 0) return chain;
  kv::BlockHash parent = hit.hashes.empty() ? kv::kRootHash : hit.hashes.back();
  // Leave at least one token to compute, for the logits.
  for (int32_t b = hit.num_tokens / bs; (b + 1) * bs <= r.num_tokens() - 1; ++b) {
    const std::span<const int32_t> tokens(r.tokens.data() + b * bs, static_cast<size_t>(bs));
    const kv::BlockHash h = kv::hash_block(parent, tokens, r.extra_key);
    const kv::TierKind k = tiers_->where(h);
    if (k == kv::TierKind::kNone) break;
    chain.push_back(h);
    where.push_back(k);
    parent = h;
  }
  // Fetch only the part of the run that is cheaper to read than to recompute.
  const int32_t keep = kv::blocks_to_fetch(where, tiers_->host_cost(), tiers_->disk_cost(),
                                           payload_bytes_, bs, prefill_seconds_per_token_);
  *recomputed = static_cast<int32_t>(chain.size()) - keep;
  chain.resize(static_cast<size_t>(keep));
  return chain;
}

void Scheduler::schedule_running(StepBuilder& b) {
  for (RequestKey key : running_) {
    const RequestState& r = state(key);
    if (r.relink.empty() && !r.probing && tokens_wanted(r) == 1) ++b.decodes_left;
  }
  b.prefill_left = b.decodes_left > 0 ? prefill_budget_ : std::numeric_limits<int32_t>::max();
  // Admission order: an earlier request gets blocks first and is never preempted for a later one.
  for (size_t i = 0; i < running_.size(); ++i) {
    RequestState& r = state(running_[i]);
    if (r.probing) {  // CacheBlend: nothing to compute until the probe chose the recomputes
      if (!r.probe_planned) plan_probe(b, r);
      continue;
    }
    if (!r.relink.empty()) {  // a PIC link's recomputes come first (their blocks are held)
      const int32_t n = b.prefill_room(static_cast<int32_t>(r.relink.size()));
      if (n <= 0) continue;
      b.prefills.push_back(make_relink_seq(r, n));
      b.take_prefill(n);
      // The last recomputes and the first tail chunk share the forward pass.
      const int32_t tail = r.relink.empty() ? b.prefill_room(tokens_wanted(r)) : 0;
      if (tail > 0) {
        const int32_t got = reserve_running(b, i, tail, false);
        if (got > 0) {
          b.prefills.push_back(make_seq(r, got));
          b.take_prefill(got);
        }
      }
      continue;
    }
    const int32_t want = tokens_wanted(r);
    if (want == 0) continue;
    const bool decode = want == 1;
    if (decode) --b.decodes_left;
    if (decode && r.spec.enabled() && schedule_spec(b, r)) continue;
    const int32_t n = decode ? std::min(1, b.budget) : long_prefill_room(b, want);
    if (n <= 0) continue;
    const int32_t got = reserve_running(b, i, n, decode);
    if (got == 0) continue;  // stalled, or preempted itself (then it was the last one)
    (decode ? b.decodes : b.prefills).push_back(make_seq(r, got));
    if (decode) {
      b.budget -= got;
    } else {
      b.take_prefill(got);
    }
  }
}

int32_t Scheduler::long_prefill_room(const StepBuilder& b, int32_t want) const {
  const int32_t room = b.prefill_room(want);
  const int32_t reserve = config_.long_prefill_reserve < 0 ? config_.max_batched_tokens / 4
                                                           : config_.long_prefill_reserve;
  if (reserve <= 0 || want <= 2 * config_.max_batched_tokens) return room;
  return std::min(room, std::max(1, b.budget - b.decodes_left - reserve));
}

// Blocks for n more tokens of running_[idx], preempting later-admitted requests if needed.
// Returns the tokens it may compute: n, fewer for a prefill when blocks are short, or 0.
int32_t Scheduler::reserve_running(StepBuilder& b, size_t idx, int32_t n, bool decode) {
  const RequestKey key = running_[idx];
  const RequestState& r = state(key);
  while (true) {
    if (kv_->allocate(key, r.num_scheduled + n).has_value()) return n;
    if (!decode) {  // a prefill chunk first shrinks to the free blocks
      const int64_t fit =
          static_cast<int64_t>(kv_->block_table(key).size() + kv_->num_free_blocks()) *
              kv_->block_size() -
          r.num_scheduled;
      if (fit > 0) {
        n = static_cast<int32_t>(std::min<int64_t>(n, fit));
        continue;
      }
    }
    if (running_.size() > idx + 1) {
      const RequestKey victim = running_.back();
      if (tokens_wanted(state(victim)) == 1) --b.decodes_left;
      preempt(b, victim);
      continue;
    }
    // Nobody later to preempt. A decode gives way (its blocks help earlier requests); a prefill
    // keeps its blocks and waits: earlier requests preempt it when they need them.
    if (decode) preempt(b, key);
    return 0;
  }
}

void Scheduler::preempt(StepBuilder& b, RequestKey key) {
  RequestState& r = state(key);
  kv_->free(key);
  for (InFlightChunk& c : r.in_flight) c.stale = true;
  r.relink.clear();  // everything is recomputed, exactly
  r.probing = false;
  r.blend_candidates.clear();
  r.publish_limit = std::numeric_limits<int32_t>::max();
  r.num_computed = 0;
  r.num_scheduled = 0;
  r.phase = RequestPhase::kWaiting;
  r.preempted = true;
  ++r.num_preemptions;
  ++num_preemptions_;
  running_.erase(std::find(running_.begin(), running_.end(), key));
  waiting_.push_front(key);
  b.plan.preempted.push_back(key);
}

void Scheduler::schedule_waiting(StepBuilder& b) {
  while (b.budget > 0 && b.prefill_left > 0 &&
         running_.size() + populating_.size() < static_cast<size_t>(config_.max_num_seqs) &&
         !waiting_.empty()) {
    promote_pick();
    RequestState& r = state(waiting_.front());
    if (r.num_pending_samples > 0) break;          // preempted; its last token is not known yet
    if (r.num_generated() >= r.max_tokens) break;  // complete: the caller finishes it
    if (!admit(b, r)) break;                       // nobody overtakes the head
    charge_admitted(r);
  }
}

// Admits the head of the waiting queue if its blocks fit; schedules its first chunk.
bool Scheduler::admit(StepBuilder& b, RequestState& r) {
  const int32_t len = r.num_tokens();
  const kv::KvCacheManager::PrefixHit hit = kv_->lookup_prefix(r.tokens, r.extra_key);
  // A preempted request reserves blocks for everything it had, so it cannot thrash.
  auto reservation = [&](int32_t start) {
    return r.preempted ? len : start + b.prefill_room(len - start);
  };
  if (!r.pic.chunks.empty()) {
    const kv::PicLinkPlan link =
        kv::plan_pic_link(len, hit.num_tokens, r.pic.chunks, r.pic.variant);
    if (link.linked_end > hit.num_tokens && !r.preempted) return admit_linked(b, r, hit, link);
    release_pic_sources(b, r);  // nothing to link: an ordinary admission
  }
  // Full blocks after the pool hit that a lower tier holds (and that are cheaper to read than
  // to recompute) are read by the transfer thread while the request waits as populating.
  int32_t recomputed = 0;
  const std::vector<kv::BlockHash> chain = tier_chain(r, hit, &recomputed);
  const int32_t tier_start =
      hit.num_tokens + static_cast<int32_t>(chain.size()) * kv_->block_size();
  const auto table = kv_->allocate(r.key, reservation(tier_start), &hit);
  if (!table.has_value()) return false;
  tier_blocks_recomputed_ += recomputed;
  if (!chain.empty()) {
    r.tier_hit_tokens = hit.num_tokens;
    r.tier_first_block = static_cast<int32_t>(hit.blocks.size());
    r.tier_chain_blocks = static_cast<int32_t>(chain.size());
    r.phase = RequestPhase::kPopulating;
    waiting_.pop_front();
    populating_.push_back(r.key);
    transfer_->submit(r.key, chain);
    return true;
  }
  const int32_t start = hit.num_tokens;
  const int32_t n = b.prefill_room(len - start);
  if (start % kv_->block_size() != 0) {
    // The hit ends inside its last block, whose rows from `start` on are recomputed.
    const kv::KvCacheManager::WritableResult w = kv_->make_writable(r.key, start);
    if (w.no_room) {
      kv_->free(r.key);
      return false;
    }
    if (w.copy.has_value()) b.plan.copies.push_back(*w.copy);
  }
  if (!r.admitted_once) {
    r.admitted_once = true;
    r.num_cached_tokens = start;
    kv_->record_prefix_query(len, start);
  }
  waiting_.pop_front();
  running_.push_back(r.key);
  r.phase = RequestPhase::kRunning;
  r.num_computed = start;
  r.num_scheduled = start;
  b.prefills.push_back(make_seq(r, n));
  b.take_prefill(n);
  return true;
}

ScheduledSeq Scheduler::make_seq(RequestState& r, int32_t n) {
  ScheduledSeq s;
  s.key = r.key;
  s.start_pos = r.num_scheduled;
  s.num_tokens = n;
  s.samples = r.num_scheduled + n == r.effective_len();
  s.tokens.reserve(n);
  for (int32_t p = s.start_pos; p < s.start_pos + n; ++p) {
    s.tokens.push_back(p < r.num_tokens() ? r.tokens[p] : kPlaceholderToken);
  }
  const std::span<const kv::BlockId> table = kv_->block_table(r.key);
  s.block_table.assign(table.begin(), table.end());
  r.num_scheduled += n;
  if (s.samples) ++r.num_pending_samples;
  r.in_flight.push_back(InFlightChunk{s.start_pos, n, s.samples, false});
  return s;
}

void Scheduler::update(const StepPlan& plan, std::span<const SeqResult> results) {
  KEEL_CHECK_MSG(plan.step_id == next_update_id_,
                 "Scheduler::update must take plans in the order schedule() made them");
  ++next_update_id_;
  for (const ScheduledSeq& s : plan.seqs) {
    const auto it = requests_.find(s.key);
    if (it == requests_.end()) continue;  // finished or aborted since the plan was made
    RequestState& r = *it->second;
    KEEL_CHECK_MSG(!r.in_flight.empty(), "update of a seq that is not in flight");
    const InFlightChunk c = r.in_flight.front();
    KEEL_CHECK_MSG(c.start_pos == s.start_pos && c.num_tokens == s.num_tokens &&
                       c.samples == s.samples && c.num_drafts == s.num_drafts,
                   "update: the plan's seq does not match the scheduler's record");
    r.in_flight.pop_front();
    int32_t emitted = 0;
    if (c.samples) {
      auto res = std::find_if(results.begin(), results.end(),
                              [&](const SeqResult& x) { return x.key == s.key; });
      KEEL_CHECK_MSG(res != results.end(), "update: no result for a seq with samples = true");
      KEEL_CHECK(r.num_tokens() == c.start_pos + c.num_tokens - c.num_drafts);
      // One token, or a verification's accepted drafts and the one after them (consecutive).
      for (; res != results.end() && res->key == s.key && emitted <= c.num_drafts; ++res) {
        r.tokens.push_back(res->token);
        ++emitted;
      }
      --r.num_pending_samples;
      r.num_pending_drafts -= c.num_drafts;
      vtc_charge(&vtc_, r.tenant, r.tenant_weight, 0, emitted);
      program_charge(config_.programs, &programs_, r.program, 0, emitted);
    }
    if (c.stale || c.relink) continue;  // preempted since (KV gone), or below num_computed
    KEEL_CHECK(r.num_computed == c.start_pos);
    if (c.num_drafts > 0) {
      apply_verification(r, c, emitted);
    } else {
      r.num_computed += c.num_tokens;
    }
    kv_->publish_full_blocks(
        r.key, r.tokens, std::min({r.num_computed, r.publish_limit, r.exact_limit}), r.extra_key);
  }
}

void Scheduler::resolve_plan(StepPlan* plan) const {
  std::erase_if(plan->seqs, [&](const ScheduledSeq& s) { return !requests_.contains(s.key); });
  for (ScheduledSeq& s : plan->seqs) {
    const RequestState& r = *requests_.at(s.key);
    for (int32_t i = 0; i < s.num_tokens; ++i) {
      const int32_t pos = s.start_pos + i;
      if (s.tokens[i] == kPlaceholderToken && pos < r.num_tokens()) s.tokens[i] = r.tokens[pos];
    }
  }
}

namespace {

// The RequestState invariants (request_state.h).
Status check_request(const RequestState& r) {
  if (r.num_computed < 0 || r.num_computed > r.num_scheduled ||
      r.num_scheduled > r.effective_len()) {
    return Status::internal(key_str(r.key) + ": computed " + std::to_string(r.num_computed) +
                            ", scheduled " + std::to_string(r.num_scheduled) +
                            ", effective length " + std::to_string(r.effective_len()));
  }
  int32_t samples = 0;
  int32_t pos = r.num_computed;
  for (const InFlightChunk& c : r.in_flight) {
    if (c.samples) ++samples;
    if (c.stale || c.relink) continue;
    if (c.start_pos != pos || c.num_tokens < 1) {
      return Status::internal(key_str(r.key) + ": in-flight chunks are not contiguous");
    }
    pos += c.num_tokens;
  }
  if (pos != r.num_scheduled) {
    return Status::internal(key_str(r.key) + ": in-flight chunks end at " + std::to_string(pos) +
                            ", scheduled is " + std::to_string(r.num_scheduled));
  }
  if (samples != r.num_pending_samples) {
    return Status::internal(key_str(r.key) + ": pending samples do not match in-flight chunks");
  }
  return Status::ok_status();
}

}  // namespace

Status Scheduler::check_invariants() const {
  if (running_.size() > static_cast<size_t>(config_.max_num_seqs)) {
    return Status::internal("more running requests than max_num_seqs");
  }
  if (running_.size() + waiting_.size() + populating_.size() != requests_.size()) {
    return Status::internal("a request is in no queue or in two");
  }
  for (RequestKey key : populating_) {
    const RequestState* r = find(key);
    if (r == nullptr || r->phase != RequestPhase::kPopulating) {
      return Status::internal(key_str(key) + " is queued as populating but is not");
    }
  }
  for (RequestKey key : waiting_) {
    const RequestState* r = find(key);
    if (r == nullptr || r->phase != RequestPhase::kWaiting) {
      return Status::internal(key_str(key) + " is queued as waiting but is not");
    }
    if (r->num_scheduled != 0 || !kv_->block_table(key).empty()) {
      return Status::internal(key_str(key) + " is waiting but holds KV");
    }
  }
  for (RequestKey key : running_) {
    const RequestState* r = find(key);
    if (r == nullptr || r->phase != RequestPhase::kRunning) {
      return Status::internal(key_str(key) + " is queued as running but is not");
    }
    if (static_cast<int64_t>(kv_->block_table(key).size()) < kv_->blocks_for(r->num_scheduled)) {
      return Status::internal(key_str(key) + " has too few blocks for its scheduled tokens");
    }
  }
  for (const auto& [key, r] : requests_) {
    if (Status s = check_request(*r); !s.ok()) return s;
  }
  return kv_->check_invariants();
}

}  // namespace keel::engine
