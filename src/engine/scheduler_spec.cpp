// Scheduler, speculative part (see scheduler.h, set_speculation()): a speculating request's
// decode carries drafts (drafter.h) verified in the same forward pass; update() keeps the
// accepted positions and rolls the KV of the rejected ones back. Drafts need every token known,
// so a speculating request is left out of plans made ahead while its last token is computing;
// extend_plan() adds its decode once that token is known (extend_decodes()).
// Thread safety: engine thread only.
#include <algorithm>
#include <limits>

#include "core/check.h"
#include "engine/drafter.h"
#include "engine/scheduler.h"

namespace keel::engine {

void Scheduler::set_speculation(RequestKey key, const SpeculativeParams& params) {
  KEEL_CHECK(params.validate().ok());
  state(key).spec = params;
}

bool Scheduler::schedule_spec(StepBuilder& b, RequestState& r) {
  // Room for drafts: the step's budget after every decode still to come has its token, the
  // tokens the request may still generate (a verification emits accepted + 1), the context.
  int32_t room = std::min(b.budget - 1 - b.decodes_left, r.max_tokens - r.num_generated() - 1);
  if (config_.max_model_len > 0) room = std::min(room, config_.max_model_len - r.num_tokens() - 1);
  if (room <= 0) return false;
  std::vector<int32_t> drafts;
  const std::span<const int32_t> proposed = r.proposed_at == r.num_tokens()
                                                ? std::span<const int32_t>(r.proposed_drafts)
                                                : std::span<const int32_t>();
  draft_tokens(r.spec, r.tokens, proposed, room, &drafts);
  if (drafts.empty()) return false;
  const int32_t start = r.num_scheduled;
  KEEL_CHECK(start == r.num_tokens() - 1 && r.num_pending_samples == 0);
  auto d = static_cast<int32_t>(drafts.size());
  if (!kv_->allocate(r.key, start + 1 + d).has_value()) {
    // Drafts never preempt anybody: keep those that fit in the blocks held or free.
    const int64_t fit =
        static_cast<int64_t>(kv_->block_table(r.key).size() + kv_->num_free_blocks()) *
            kv_->block_size() -
        start - 1;
    if (fit <= 0) return false;
    d = static_cast<int32_t>(std::min<int64_t>(d, fit));
    KEEL_CHECK(kv_->allocate(r.key, start + 1 + d).has_value());
  }
  ScheduledSeq s;
  s.key = r.key;
  s.start_pos = start;
  s.num_tokens = 1 + d;
  s.num_drafts = d;
  s.samples = true;
  s.tokens.push_back(r.tokens.back());
  s.tokens.insert(s.tokens.end(), drafts.begin(), drafts.begin() + d);
  const std::span<const kv::BlockId> table = kv_->block_table(r.key);
  s.block_table.assign(table.begin(), table.end());
  r.num_scheduled += 1 + d;
  ++r.num_pending_samples;
  r.num_pending_drafts += d;
  r.in_flight.push_back(InFlightChunk{start, 1 + d, true, false, false, d});
  b.decodes.push_back(std::move(s));
  b.budget -= 1 + d;
  return true;
}

void Scheduler::propose_drafts(RequestKey key, std::vector<int32_t> drafts) {
  const auto it = requests_.find(key);
  if (it == requests_.end()) return;  // finished or aborted
  it->second->proposed_drafts = std::move(drafts);
  it->second->proposed_at = it->second->num_tokens();
}

void Scheduler::extend_decodes(StepBuilder& b) {
  for (RequestKey key : running_) {
    if (b.budget <= 0) return;
    RequestState& r = state(key);
    if (!r.spec.enabled() || !r.in_flight.empty() || !r.relink.empty() || r.probing ||
        tokens_wanted(r) != 1) {
      continue;
    }
    if (schedule_spec(b, r)) continue;
    if (!kv_->allocate(key, r.num_scheduled + 1).has_value()) continue;  // the next plan preempts
    b.decodes.push_back(make_seq(r, 1));
    b.budget -= 1;
  }
}

void Scheduler::apply_verification(RequestState& r, const InFlightChunk& c, int32_t num_emitted) {
  KEEL_CHECK(num_emitted >= 1 && num_emitted <= c.num_drafts + 1);
  KEEL_CHECK_MSG(r.num_scheduled == c.start_pos + c.num_tokens,
                 "a verification chunk must be the request's last planned chunk");
  // Valid KV: the last known token and the accepted drafts; the emitted token after them is the
  // request's new last token, computed by its next decode.
  r.num_computed = c.start_pos + num_emitted;
  r.num_scheduled = r.num_computed;
  kv_->truncate(r.key, r.num_computed);
}

}  // namespace keel::engine
