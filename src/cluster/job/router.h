// The job executor's router as a pure function: route(RouteInput) → RouteDecision, DeepServe's
// Algorithm 1 (PD-aware → locality-aware if the group's loads are balanced, else load-aware),
// plus the baselines a benchmark compares it with. No clocks, no randomness, no I/O: the caller
// passes the fleet, the prefix index, the heatmap and a round-robin cursor, and applies the
// decision (a kNoCapacity decision is answered with 503).
//
// Load of a TE (what "least load" and the balance test compare), in tokens:
//   load = pending_tokens + kv_pressure_tokens × kv_blocks_used / kv_blocks_total
// (the KV term is 0 when kv_blocks_total is 0). A group is balanced when
//   (max load − min load) / max(max load, 1) ≤ balance_threshold, or
//   max load − min load ≤ balance_abs_tokens,
// unless one of its TEs is idle (nothing running, waiting or pending) while another is not: then
// least load sends the request to the idle one (a TE added by a scale-out holds no prefix, and
// locality would leave it idle until the busy TE's load passed balance_abs_tokens).
// Locality score of a TE: pool blocks + lower_tier_weight × dram/disk blocks of its prefix match
// (prefix_index.h). Ties — equal score, then equal load — go to the tied TE at position
// cursor mod (number tied), in snapshot order, so idle equal TEs share the traffic.
// The PD step: with a heatmap, its value picks colocated or disaggregated; without one, a model
// that has both colocated TEs and prefill/decode pairs treats each prefill TE (standing for its
// pair; its load plus the least loaded decode TE's) as one more replica beside the colocated TEs,
// and the rule below picks among them all. A model with prefill TEs but no decode TE (or the
// reverse) runs whole requests on them (role_fallback): every role's engine can.
// Sticky first (KV kept across tool calls, docs/agent-kv.md): when the caller names the TE holding
// the request's program's pin (RouteInput::sticky_te_id) and that TE is a healthy colocated TE of
// the model, it runs the request — under every policy, before the PD step, locality and load —
// unless it is overloaded: its load exceeds the least loaded colocated TE's by more than the
// prompt's tokens plus sticky_slack_tokens (going elsewhere costs about the prompt's recompute, so
// the pin is worth at most that much more queue). A TE that is gone (not in the snapshot),
// unhealthy or draining (left out by the caller) is never chosen: the normal rule decides.
// Thread safety: pure functions over values; RouterCounters is a plain struct with one owner.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "cluster/job/pd_heatmap.h"
#include "cluster/job/prefix_index.h"
#include "cluster/protocol/fleet.h"
#include "core/status.h"

namespace keel::cluster {

// kDeepServe: Algorithm 1. The baselines skip the heatmap (colocated when the model has a
// colocated group, else a prefill/decode pair) and pick within the group by: kRoundRobin the
// cursor; kLeastLoad the least load; kPrefix the best locality score regardless of balance.
enum class RoutePolicy { kDeepServe, kRoundRobin, kLeastLoad, kPrefix };
[[nodiscard]] std::string_view route_policy_name(RoutePolicy policy);  // "deepserve", ...
[[nodiscard]] std::optional<RoutePolicy> parse_route_policy(std::string_view name);

struct RouterConfig {
  RoutePolicy policy = RoutePolicy::kDeepServe;
  // Loads are balanced when (max − min) / max(max, 1) ≤ this; in [0, 1]. DeepServe leaves the
  // value open; 0.25 keeps locality while the lightest TE has at least 3/4 of the heaviest's load.
  double balance_threshold = 0.25;
  // ... or when max − min ≤ this many tokens (SGLang's router has the same pair of absolute and
  // relative thresholds): with small, fast requests the relative test alone flips on noise.
  double balance_abs_tokens = 0.0;
  // A prefix block held only in dram/disk counts this fraction of a pool block; in [0, 1].
  double lower_tier_weight = 0.5;
  // Heatmap value above which a request goes disaggregated (DeepServe: positive values).
  double pd_threshold = 0.0;
  // Tokens of load a completely full KV pool adds (see the header comment); >= 0.
  double kv_pressure_tokens = 4096.0;
  // Sticky routing: the pinned TE is passed over once its load exceeds the least loaded colocated
  // TE's by more than the prompt's tokens plus this (header comment); >= 0.
  double sticky_slack_tokens = 4096.0;
  [[nodiscard]] Status validate() const;
};

// Everything one routing decision reads. Borrowed: the references and spans must outlive the
// route() call only.
struct RouteInput {
  const FleetSnapshot& fleet;
  const PrefixIndex& index;
  const PdHeatmap* heatmap = nullptr;  // optional; none: pairs are replicas (header comment)
  std::string_view model;              // served model name (TeInfo::model)
  int64_t prompt_tokens = 0;
  std::span<const uint64_t> prompt_block_hashes;  // prompt_block_hashes() of the prompt
  int64_t predicted_decode_tokens = 0;
  const RouterConfig& config;  // must validate()
  uint64_t cursor = 0;         // the caller's request counter: round robin and tie-breaks
  // The TE holding the pin of the request's program (sticky_pins.h); "" = none.
  std::string_view sticky_te_id = {};
};

// Which PD arrangement serves the request.
enum class PdMode { kPdColocated, kPdDisaggregated };
// How the (prefill or colocated) TE was picked; kNoCapacity: none could be.
// kSticky: the TE holding the program's pin (header comment).
enum class RouteBranch { kSticky, kLocality, kLeastLoad, kRoundRobin, kNoCapacity };
[[nodiscard]] std::string_view pd_mode_name(PdMode mode);              // "colocated", ...
[[nodiscard]] std::string_view route_branch_name(RouteBranch branch);  // "locality", ...

struct RouteDecision {
  RouteBranch branch = RouteBranch::kNoCapacity;
  PdMode pd = PdMode::kPdColocated;     // meaningful unless kNoCapacity
  std::string te_id;                    // the colocated or prefill TE; empty for kNoCapacity
  std::string decode_te_id;             // the decode TE when kPdDisaggregated, else empty
  PrefixMatch match;                    // the prompt's leading blocks te_id holds
  std::optional<double> heatmap_value;  // when the PD step consulted the heatmap
  // A whole request on a prefill or decode TE: the model has no colocated TE and no complete
  // pair (one role is missing, e.g. its only decode TE died).
  bool role_fallback = false;
  std::string reason;  // one line for logs and traces
};

[[nodiscard]] RouteDecision route(const RouteInput& input);

// Decisions counted per outcome, for /metrics.
struct RouterCounters {
  int64_t sticky = 0;
  int64_t locality = 0;
  int64_t least_load = 0;
  int64_t round_robin = 0;
  int64_t no_capacity = 0;
  int64_t pd_colocated = 0;  // routed decisions (not kNoCapacity) per PD mode
  int64_t pd_disaggregated = 0;
  int64_t role_fallback = 0;        // whole requests on a prefill or decode TE (role_fallback)
  int64_t matched_blocks = 0;       // sum of decisions' match.num_blocks
  int64_t matched_pool_blocks = 0;  // sum of decisions' match.num_pool_blocks
  void record(const RouteDecision& decision);
  friend bool operator==(const RouterCounters&, const RouterCounters&) = default;
};

}  // namespace keel::cluster
