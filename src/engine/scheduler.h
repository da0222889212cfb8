// Scheduler: continuous batching as a step function (vLLM v1 style). schedule() reads the request
// queues and the KV cache manager and returns a plain StepPlan; update() applies the step's
// sampled tokens; finishing (EOS, stop, length) is the caller's decision (finish()). The policy
// and the schedule-ahead contract are described at the class.
// Invariants: RequestState's (request_state.h); every request is in exactly one of the waiting
// queue and the running list; running ≤ max_num_seqs; only running requests hold KV blocks.
// Thread safety: none; owned by the engine thread. The KvCacheManager must outlive it and is
// used by nobody else while the scheduler runs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "engine/program_priority.h"
#include "engine/request_state.h"
#include "engine/step_plan.h"
#include "engine/tier_transfer.h"
#include "engine/vtc.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_tiers.h"

namespace keel::engine {

struct SchedulerConfig {
  int32_t max_num_seqs = 16;  // --max-num-seqs: running (admitted) requests at most
  int32_t max_batched_tokens =
      512;                    // --max-batched-tokens: tokens computed per step (≥ max_num_seqs)
  int32_t max_waiting = 256;  // --max-waiting: admission queue cap (enforced by Engine)
  int32_t max_model_len = 0;  // context length: positions < max_model_len; 0 = no limit
  ProgramSchedulingConfig programs;  // within a tenant: program-aware admission (PLAS) or FCFS
  // --long-prefill-reserve: tokens of every step a long prefill (more prompt tokens left than
  // two steps' max_batched_tokens) leaves to requests that arrive while it runs, so that a short
  // request starts in the next step instead of waiting for the whole long prompt. -1 = a quarter of
  // max_batched_tokens; 0 = none (a long prefill takes whole steps).
  int32_t long_prefill_reserve = -1;
  [[nodiscard]] Status validate() const;
};

// Policy: one token budget per step (max_batched_tokens). Running requests are served in
// admission order (their priority): decodes get 1 token each and are budgeted first, partial
// prefills take chunks of the rest — at most prefill_budget() prompt tokens in all when the step
// also decodes (a chunk also shrinks to the free blocks rather than preempting), and a long
// prefill's chunk leaves long_prefill_reserve tokens of the step to admissions (also those a plan
// made ahead takes in extend_plan);
// then waiting requests are admitted in the order of fair admission among tenants (vtc.h: the
// backlogged tenant with the least virtual token counter goes first; within that tenant, by
// program-aware admission (program_priority.h: the call whose agent program has received the
// least service, discretised into levels, earliest first within a level; with kFcfs, or when no
// request names a program, the earliest); a preempted request at the front keeps its place), and
// the first one that does not fit stops admission, at most max_num_seqs running. Prompt tokens
// are charged to the tenant's counter at first admission (to its program's: those the prefix
// cache did not serve), generated tokens as update() appends them. A new request looks up the
// prefix cache; hit tokens count as computed. When a running request cannot get a block, the most
// recently admitted running request is preempted by recompute (blocks freed, back to the FRONT of
// the waiting queue with prompt + generated tokens); an older request is never preempted for a
// newer one. A preempted request is re-admitted only when blocks for all its tokens fit, so it is
// not preempted again before its recompute completes (no thrash). No admission happens in a step
// that preempted.
//
// Schedule-ahead: schedule() for step N+1 may run before update() for step N; each seq of N with
// samples = true then counts as one more token (kPlaceholderToken in the plan). update() must see
// plans in the order they were made. A request finished or aborted after a plan was made is
// skipped by update(); resolve_plan() drops it from a plan not yet executed and fills in
// placeholder tokens (call it after update(N), and again right before executing if an abort may
// have landed in between — a seq left in is harmless, its result is ignored).
//
// KV blocks of a request finished, aborted or preempted while a plan that writes them is in
// flight may be handed out by a LATER plan only. The engine executes plans strictly in order
// (plan N+1's copies after plan N's forward pass), so such stale writes land before the new
// owner's and never in a published (hashed) block: they are harmless.
class Scheduler {
 public:
  // `kv` is borrowed; config must validate().
  Scheduler(const SchedulerConfig& config, kv::KvCacheManager* kv);
  // Lower KV tiers and the thread that reads them (both borrowed; tiers null = none). With
  // tiers, admission extends a pool prefix hit with the following full blocks a tier holds: the
  // request takes its blocks and waits as populating while `transfer` reads them, and joins the
  // running ones at the first schedule() after the reads complete, with their payloads in that
  // plan (StepPlan::promotions, copied into the pool before the forward pass). Every plan also
  // carries the cached blocks its allocations evicted (StepPlan::demotions; the KV manager must
  // record evictions). `payload_bytes`: the bytes of one pool block.
  void set_tiers(kv::KvTiers* tiers, size_t payload_bytes, TierTransfer* transfer);
  // The model's measured prefill cost, for the fetch-vs-recompute decision on tier hits
  // (kv::blocks_to_fetch; ≤ 0 = not measured yet: fetch every tier hit).
  void set_prefill_seconds_per_token(double s) { prefill_seconds_per_token_ = s; }
  // The most prompt tokens (prefill chunks, PIC recomputes) a step may compute when it also
  // decodes — the engine sizes it from measured step costs so decode steps keep their pace
  // (StepCostModel). Steps without decodes use the whole token budget. Default: no limit.
  void set_prefill_budget(int32_t tokens) { prefill_budget_ = tokens < 1 ? 1 : tokens; }
  [[nodiscard]] int32_t prefill_budget() const { return prefill_budget_; }
  // Tier-held blocks that admissions fetched, and those they chose to recompute instead.
  [[nodiscard]] int64_t tier_blocks_fetched() const { return tier_blocks_fetched_; }
  [[nodiscard]] int64_t tier_blocks_recomputed() const { return tier_blocks_recomputed_; }

  // InvalidArgument / OutOfRange when a request could never run: empty prompt, max_tokens < 1,
  // prompt + max_tokens over max_model_len, or more KV blocks than the whole pool. The engine
  // checks this before add().
  [[nodiscard]] Status validate_request(size_t num_prompt_tokens, int32_t max_tokens) const;
  // Queues a new request (key unused so far; validate_request() must hold). With `pic` chunks
  // (each compiled by a retained request, pic.sources): at admission the chunk positions after
  // the prefix hit are linked from those tables (StepPlan::links, K re-rotated), the variant's
  // positions are recomputed first (scattered seqs), then the rest as usual; the sources are
  // released in the plan that reads them (StepPlan::link_sources) or when the request goes.
  // A request preempted later recomputes everything (its link is not redone).
  // The scheduler owns the state it creates here (tests and callers without a record of their own).
  void add(RequestKey key, std::vector<int32_t> prompt, int32_t max_tokens, kv::BlockHash extra_key,
           PicState pic = {});
  // The same for a state the caller owns — the engine's one record per request (engine_request.h)
  // holds it: the caller has filled key, tokens (the prompt), num_prompt_tokens, max_tokens,
  // extra_key and pic, the rest as constructed; the scheduler borrows it from here until finish(),
  // abort() or retain() of its key, and the caller keeps it alive (at a fixed address) until then.
  void add(RequestState* r);
  // Sparse decode: positions from `limit` on are computed approximately (forever, also after a
  // preemption), so their blocks are never published in the prefix cache.
  void set_exact_limit(RequestKey key, int32_t limit);
  // Speculative decoding for `key` (docs/speculative.md): each decode step, when every token is
  // known, drafts up to params.k tokens (drafter.h) and verifies them as one seq with num_drafts;
  // update() keeps the emitted tokens, counts the accepted positions as computed and rolls the
  // KV of rejected ones back (KvCacheManager::truncate; they were never published).
  void set_speculation(RequestKey key, const SpeculativeParams& params);
  // The draft head's proposal for `key`, drafted by the step whose update() just ran after the
  // request's last token; used by its next speculating decode while the request still has the
  // tokens it has now. Unknown keys (finished, aborted) are ignored.
  void propose_drafts(RequestKey key, std::vector<int32_t> drafts);
  // Sparse decode: gives back the blocks of `pages` (indices into the request's block table,
  // each below its last page) to the pool. A request that is not running is left alone.
  void release_pages(RequestKey key, std::span<const int32_t> pages);
  // Tokens linked from chunk caches and positions recomputed by links so far.
  [[nodiscard]] int64_t pic_tokens_linked() const { return pic_tokens_linked_; }
  [[nodiscard]] int64_t pic_tokens_recomputed() const { return pic_tokens_recomputed_; }
  // Removes a request wherever it is (waiting, prefilling, running) and frees its blocks now.
  // Unknown keys are ignored. finish() is the same for a request that completed.
  void abort(RequestKey key);
  void finish(RequestKey key);
  // finish() that keeps the request's KV blocks (a pinned context cache, a compiled PIC chunk):
  // they stay allocated under `key` in the KV manager, outside every queue, with one reference;
  // acquire_retained() adds one (false when `key` is not retained), release_retained() drops one
  // and frees the blocks with the last.
  void retain(RequestKey key);
  bool acquire_retained(RequestKey key);
  void release_retained(RequestKey key);

  // Plans the next step (see the policy above).
  [[nodiscard]] StepPlan schedule();
  // Applies a step's results: advances computed positions, appends sampled tokens (one per seq
  // with samples = true; `results` may list them in any order) and publishes newly full blocks
  // in the prefix cache. Seqs of requests finished or aborted since the plan are skipped.
  void update(const StepPlan& plan, std::span<const SeqResult> results);
  // CacheBlend: the probe's layer-1 V deviations (parallel to the probe's positions; empty when
  // it failed) add the top blend_percent of the request's candidates to its recomputes.
  void apply_probe(RequestKey key, std::span<const float> deviation);
  // For a plan made ahead (before the previous step's update): drops seqs of requests that are
  // gone and fills placeholder tokens that are known now. Call after that update().
  void resolve_plan(StepPlan* plan) const;
  // Admits waiting requests (added since the plan was made ahead) into a plan not yet executed,
  // within what is left of its token and prefill budgets — so a request that arrives while a
  // step computes starts in the next step, not the one after. Nothing when the plan preempted.
  // Call after resolve_plan().
  void extend_plan(StepPlan* plan);

  [[nodiscard]] size_t num_waiting() const { return waiting_.size(); }
  [[nodiscard]] size_t num_running() const { return running_.size(); }
  [[nodiscard]] int64_t num_preemptions() const { return num_preemptions_; }
  [[nodiscard]] bool has_requests() const { return !requests_.empty(); }
  // The request's state, or nullptr when unknown (finished, aborted, never added).
  [[nodiscard]] const RequestState* find(RequestKey key) const;
  [[nodiscard]] const SchedulerConfig& config() const { return config_; }
  // The tenants' virtual token counters (vtc.h).
  [[nodiscard]] const VtcCounters& vtc() const { return vtc_; }
  // The programs' attained service (program_priority.h).
  [[nodiscard]] const ProgramServiceTable& programs() const { return programs_; }
  // Verifies the RequestState invariants, queue membership, block coverage and the KV manager's
  // own invariants. For tests.
  [[nodiscard]] Status check_invariants() const;

 private:
  struct StepBuilder;  // per-schedule() scratch state (scheduler.cpp)

  RequestState& state(RequestKey key);
  [[nodiscard]] int32_t tokens_wanted(const RequestState& r) const;
  void schedule_running(StepBuilder& b);
  int32_t reserve_running(StepBuilder& b, size_t idx, int32_t n, bool decode);
  // A running prefill's chunk: prefill_room, less the long-prefill reserve for a long prompt.
  [[nodiscard]] int32_t long_prefill_room(const StepBuilder& b, int32_t want) const;
  void schedule_waiting(StepBuilder& b);
  bool admit(StepBuilder& b, RequestState& r);
  // Fair admission (vtc.h): the tenants of the waiting requests in queue order; whether `tenant`
  // has one waiting; moving the choice of the VTC, then of program-aware admission among that
  // tenant's requests, to the front (unless a preempted request is there); charging an admitted
  // request's prompt.
  [[nodiscard]] std::vector<std::string_view> waiting_tenants() const;
  [[nodiscard]] bool tenant_waiting(std::string_view tenant) const;
  void promote_pick();
  void charge_admitted(RequestState& r);
  // admit() for a request with PIC chunks whose link covers more than the prefix hit: blocks,
  // row links, relink positions, first seq. False when its blocks do not fit.
  bool admit_linked(StepBuilder& b, RequestState& r, const kv::KvCacheManager::PrefixHit& hit,
                    const kv::PicLinkPlan& link);
  // Hands r's PIC sources to the plan for release after its links (or drops the link).
  void release_pic_sources(StepBuilder& b, RequestState& r);
  ScheduledSeq make_relink_seq(RequestState& r, int32_t n);
  // Puts r's probe in the plan when the plan has none yet.
  void plan_probe(StepBuilder& b, RequestState& r);
  // Moves populating requests whose tier reads finished to running, with their promotions.
  void finish_populating(StepBuilder& b);
  // Hashes of the full blocks right after a block-aligned pool hit that a lower tier holds (up to
  // the first miss, one token short of the sequence's end).
  // Only the leading part that is cheaper to fetch than to recompute is returned; the number of
  // tier-held blocks left to recompute goes to *recomputed.
  [[nodiscard]] std::vector<kv::BlockHash> tier_chain(const RequestState& r,
                                                      const kv::KvCacheManager::PrefixHit& hit,
                                                      int32_t* recomputed) const;
  void preempt(StepBuilder& b, RequestKey key);
  ScheduledSeq make_seq(RequestState& r, int32_t n);
  // Speculative decoding (scheduler_spec.cpp). Plans r's decode (r decode-ready, nothing in
  // flight, its decode's budget slot already counted) with drafts when the drafter proposes any
  // and their blocks fit without preempting; false: nothing planned (plan a plain decode).
  bool schedule_spec(StepBuilder& b, RequestState& r);
  // extend_plan(): decodes of running requests a plan made ahead left out because their last
  // token was not known then (speculating ones), with drafts; without preempting.
  void extend_decodes(StepBuilder& b);
  // update() of a verification chunk's KV: the accepted positions become computed, the rest
  // rolled back.
  void apply_verification(RequestState& r, const InFlightChunk& c, int32_t num_emitted);
  void remove(RequestKey key, bool keep_blocks = false);

  SchedulerConfig config_;
  kv::KvCacheManager* kv_;              // borrowed
  kv::KvTiers* tiers_ = nullptr;        // borrowed; null = no lower tiers
  TierTransfer* transfer_ = nullptr;    // borrowed; set whenever tiers_ is
  std::vector<RequestKey> populating_;  // admitted, waiting for tier reads
  size_t payload_bytes_ = 0;
  double prefill_seconds_per_token_ = 0.0;
  int32_t prefill_budget_ = std::numeric_limits<int32_t>::max();
  int64_t tier_blocks_fetched_ = 0;
  int64_t tier_blocks_recomputed_ = 0;
  int64_t pic_tokens_linked_ = 0;
  int64_t pic_tokens_recomputed_ = 0;
  std::unordered_map<RequestKey, RequestState*> requests_;  // every request it schedules
  // The states add(key, …) created (the others are borrowed from the caller).
  std::unordered_map<RequestKey, std::unique_ptr<RequestState>> owned_;
  std::deque<RequestKey> waiting_;                // FCFS; preempted requests go to the front
  std::vector<RequestKey> running_;               // admission order (oldest first)
  std::unordered_map<RequestKey, int> retained_;  // finished, blocks kept: reference counts
  int64_t next_step_id_ = 0;
  int64_t next_update_id_ = 0;
  int64_t num_preemptions_ = 0;
  VtcCounters vtc_;
  ProgramServiceTable programs_;
};

// Scratch state of one schedule() call.
struct Scheduler::StepBuilder {
  StepPlan plan;
  std::vector<ScheduledSeq> decodes;   // running requests' 1-token steps, admission order
  std::vector<ScheduledSeq> prefills;  // partial prefills, then admissions, in order
  int32_t budget = 0;                  // tokens left this step
  int32_t decodes_left = 0;  // decode-ready running requests not served yet (budget reserved)
  int32_t prefill_left = 0;  // prompt tokens left this step (prefill_budget_ when it decodes)

  // Tokens a prefill of `want` may take now.
  [[nodiscard]] int32_t prefill_room(int32_t want) const {
    return std::min({want, budget - decodes_left, prefill_left});
  }
  void take_prefill(int32_t n) {
    budget -= n;
    prefill_left -= n;
  }
};

}  // namespace keel::engine
