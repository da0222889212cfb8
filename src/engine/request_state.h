// RequestState: the scheduler's record of one request — its tokens (prompt + generated), how far
// its KV is computed and scheduled, and the chunks of it in plans not yet updated (schedule-ahead).
//
// Invariants: 0 ≤ num_computed ≤ num_scheduled ≤ effective_len();
// num_pending_samples = the in-flight chunks with samples; num_pending_drafts = the drafts of
// the in-flight chunks; a chunk with drafts (speculative verification) is the request's only
// non-stale in-flight chunk; the non-stale, non-relink in-flight
// chunks cover exactly [num_computed, num_scheduled) in order; relink positions are below
// num_computed. A waiting request has num_computed =
// num_scheduled = 0 and no KV blocks (its stale chunks, if it was preempted, may still be
// in flight).
// Thread safety: none; owned by the Scheduler on the engine thread.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <vector>

#include "engine/speculative_params.h"
#include "engine/types.h"
#include "kv/block_hash.h"
#include "kv/pic.h"

namespace keel::engine {

enum class RequestPhase {
  kWaiting,     // queued (new, or preempted and waiting to be recomputed); holds no KV blocks
  kRunning,     // admitted: holds KV blocks, is prefilling in chunks or decoding
  kPopulating,  // admitted: holds KV blocks, waits for blocks read back from a lower KV tier
};

// A chunk of a request in a plan whose update() has not run yet.
struct InFlightChunk {
  int32_t start_pos = 0;
  int32_t num_tokens = 0;
  bool samples = false;
  bool stale = false;   // the request was preempted after this chunk was planned: its KV is lost,
                        // but its sampled token (if any) is still valid and kept
  bool relink = false;  // recomputes scattered positions below num_computed (PIC link)
  int32_t num_drafts = 0;  // speculative verification: its last num_drafts tokens are drafts
};

// A request's EPIC position-independent chunks, until it is linked at admission.
struct PicState {
  std::vector<kv::PicChunk> chunks;  // spans of the prompt, each compiled alone
  std::vector<RequestKey> sources;   // per chunk: the retained compile request holding its KV
  kv::PicVariant variant;
};

struct RequestState {
  RequestKey key = 0;
  std::vector<int32_t> tokens;  // prompt then generated tokens known so far
  int32_t num_prompt_tokens = 0;
  int32_t max_tokens = 0;   // generated tokens allowed (the caller finishes the request)
  kv::BlockHash extra_key;  // prefix-cache key of the model and cache salt
  // Fair admission (vtc.h): the request's tenant and weight, and whether its prompt was charged
  // to the tenant's counter (at its first admission).
  std::string tenant;
  double tenant_weight = 1.0;
  bool vtc_charged = false;
  // Program-aware admission (program_priority.h): the agent program the request is a call of
  // ("" = a program of its own) and the scheduler's served-token count when it was queued.
  std::string program;
  double arrived_at = 0.0;
  RequestPhase phase = RequestPhase::kWaiting;
  int32_t num_computed = 0;   // positions [0, num_computed) hold valid KV (cache hit or updated)
  int32_t num_scheduled = 0;  // positions [0, num_scheduled) computed or in a pending plan
  int32_t num_pending_samples = 0;      // samples planned but not yet updated (tokens unknown)
  std::deque<InFlightChunk> in_flight;  // pending chunks, in plan order
  bool preempted = false;         // preempted once: re-admission needs blocks for all its tokens
  bool admitted_once = false;     // the prefix-cache query was counted at first admission
  int32_t num_cached_tokens = 0;  // prompt tokens served by the prefix cache at first admission
  int32_t num_preemptions = 0;
  // While populating: the pool hit's tokens and blocks, and the tier blocks being read.
  int32_t tier_hit_tokens = 0;
  int32_t tier_first_block = 0;
  int32_t tier_chain_blocks = 0;
  // PIC: the chunks to link at admission (cleared once linked or abandoned), and the positions
  // below num_computed still to recompute (ascending) before any other token of the request.
  PicState pic;
  std::vector<int32_t> relink;
  // Positions from here on may hold linked (approximate) KV: their blocks are not published in
  // the prefix cache, which must serve exact KV only.
  int32_t publish_limit = std::numeric_limits<int32_t>::max();
  // Sparse decode: positions from here on are always approximate (set once, kept on preemption).
  int32_t exact_limit = std::numeric_limits<int32_t>::max();
  // CacheBlend: linked positions the probe may choose from, the share it recomputes, and the
  // probe's state (the request computes nothing while probing).
  std::vector<int32_t> blend_candidates;
  int32_t blend_percent = 0;
  int32_t probe_start = 0;
  bool probing = false;
  bool probe_planned = false;
  // Speculative decoding (method kNone: off): drafts are proposed only when every token is known
  // (nothing sampling in flight), so a speculating request skips plans made ahead.
  SpeculativeParams spec;
  int32_t num_pending_drafts = 0;  // drafted positions in flight (not yet verified)
  // The draft head's proposal (Scheduler::propose_drafts), valid while the request has exactly
  // proposed_at tokens (it continues tokens[proposed_at - 1]); -1 = none.
  std::vector<int32_t> proposed_drafts;
  int32_t proposed_at = -1;

  [[nodiscard]] int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  [[nodiscard]] int32_t num_generated() const { return num_tokens() - num_prompt_tokens; }
  // Length counting the samples not known yet and the drafted positions being verified.
  [[nodiscard]] int32_t effective_len() const {
    return num_tokens() + num_pending_samples + num_pending_drafts;
  }
};

}  // namespace keel::engine
