// DeepServe's routing (Algorithm 1) and its baselines as a pure function (router.h).
#include "cluster/job/router.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace keel::cluster {
namespace {

// A healthy TE of the request's group, with what the pickers compare.
struct Candidate {
  const TeInfo* te = nullptr;
  double load = 0.0;
  PrefixMatch match;
  double score = 0.0;  // locality score
};

struct Pick {
  const Candidate* chosen = nullptr;
  RouteBranch branch = RouteBranch::kNoCapacity;
  std::string why;
};

std::string fmt_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

double te_load(const TeLoad& load, const RouterConfig& config) {
  double kv = 0.0;
  if (load.kv_blocks_total > 0) {
    kv = config.kv_pressure_tokens * static_cast<double>(load.kv_blocks_used) /
         static_cast<double>(load.kv_blocks_total);
  }
  return static_cast<double>(load.pending_tokens) + kv;
}

std::vector<Candidate> healthy_group(const RouteInput& in, TeRole role) {
  std::vector<Candidate> out;
  for (const TeInfo& te : in.fleet.tes) {
    if (!te.healthy || te.role != role || te.model != in.model) continue;
    Candidate c{.te = &te, .load = te_load(te.load, in.config)};
    if (role != TeRole::kDecode) c.match = in.index.match(in.prompt_block_hashes, te.id);
    c.score = static_cast<double>(c.match.num_pool_blocks) +
              in.config.lower_tier_weight * static_cast<double>(c.match.num_lower_blocks);
    out.push_back(c);
  }
  return out;
}

// The tied candidate at cursor mod (number tied).
const Candidate* break_tie(const std::vector<const Candidate*>& tied, uint64_t cursor) {
  return tied[static_cast<size_t>(cursor % tied.size())];
}

// Among `pool` (non-empty), those of least load, one of them by the cursor.
const Candidate* least_loaded(const std::vector<const Candidate*>& pool, uint64_t cursor) {
  double best = pool.front()->load;
  for (const Candidate* c : pool) best = std::min(best, c->load);
  std::vector<const Candidate*> tied;
  for (const Candidate* c : pool) {
    if (c->load == best) tied.push_back(c);
  }
  return break_tie(tied, cursor);
}

std::vector<const Candidate*> pointers(const std::vector<Candidate>& group) {
  std::vector<const Candidate*> out;
  out.reserve(group.size());
  for (const Candidate& c : group) out.push_back(&c);
  return out;
}

// Nothing running, waiting or pending on it (a dispatch counts as pending until its report).
bool idle(const TeInfo& te) {
  return te.load.num_running == 0 && te.load.num_waiting == 0 && te.load.pending_tokens == 0;
}

// Batching several requests (running or waiting): one more request would share its steps.
bool batching(const TeInfo& te) { return te.load.num_running + te.load.num_waiting >= 2; }

bool loads_balanced(const std::vector<Candidate>& group, double threshold, double abs_tokens) {
  double lo = group.front().load;
  double hi = group.front().load;
  bool any_idle = false;
  bool any_batching = false;
  for (const Candidate& c : group) {
    lo = std::min(lo, c.load);
    hi = std::max(hi, c.load);
    any_idle = any_idle || idle(*c.te);
    any_batching = any_batching || batching(*c.te);
  }
  // An idle TE beside one batching several requests is never balanced: no TE is left idle for
  // locality's sake (a TE a scale-out just added holds no prefix yet and got nothing while the busy
  // one stayed within balance_abs_tokens). One request on a TE is not enough: the next turn of a
  // conversation, sent as the last one ends (its TE's report may still show it running), goes
  // where its prefix is.
  if (any_idle && any_batching) return false;
  return hi - lo <= abs_tokens || (hi - lo) / std::max(hi, 1.0) <= threshold;
}

Pick pick_least_load(const std::vector<Candidate>& group, uint64_t cursor, std::string why) {
  const Candidate* c = least_loaded(pointers(group), cursor);
  return {c, RouteBranch::kLeastLoad, why + "least load " + fmt_double(c->load)};
}

Pick pick_locality(const std::vector<Candidate>& group, uint64_t cursor, std::string why) {
  double best = 0.0;
  for (const Candidate& c : group) best = std::max(best, c.score);
  std::vector<const Candidate*> tied;
  for (const Candidate& c : group) {
    if (c.score == best) tied.push_back(&c);
  }
  const Candidate* c = least_loaded(tied, cursor);
  why += "locality: " + std::to_string(c->match.num_blocks) + " prefix blocks (" +
         std::to_string(c->match.num_pool_blocks) + " in pool), load " + fmt_double(c->load);
  return {c, RouteBranch::kLocality, why};
}

// The colocated or prefill TE of a non-empty group, by the configured policy.
Pick pick_in_group(const std::vector<Candidate>& group, const RouteInput& in) {
  const RouterConfig& cfg = in.config;
  switch (cfg.policy) {
    case RoutePolicy::kDeepServe:
      if (loads_balanced(group, cfg.balance_threshold, cfg.balance_abs_tokens)) {
        return pick_locality(group, in.cursor, "balanced; ");
      }
      return pick_least_load(group, in.cursor, "unbalanced; ");
    case RoutePolicy::kRoundRobin: {
      const Candidate* c = &group[static_cast<size_t>(in.cursor % group.size())];
      return {c, RouteBranch::kRoundRobin, "round robin"};
    }
    case RoutePolicy::kLeastLoad:
      return pick_least_load(group, in.cursor, "");
    case RoutePolicy::kPrefix:
      return pick_locality(group, in.cursor, "");
  }
  return pick_least_load(group, in.cursor, "");
}

const Candidate* pick_decode(const std::vector<Candidate>& group, const RouteInput& in) {
  if (in.config.policy == RoutePolicy::kRoundRobin) {
    return &group[static_cast<size_t>(in.cursor % group.size())];
  }
  return least_loaded(pointers(group), in.cursor);
}

struct PdChoice {
  PdMode mode = PdMode::kPdColocated;
  std::optional<double> heatmap_value;
  std::string why;
};

// The PD-aware step; both kinds must exist for it to be a choice.
PdChoice choose_pd(bool has_colocated, bool has_pair, const RouteInput& in) {
  if (!has_pair) return {PdMode::kPdColocated, std::nullopt, "colocated (only kind); "};
  if (!has_colocated)
    return {PdMode::kPdDisaggregated, std::nullopt, "disaggregated (only kind); "};
  if (in.config.policy != RoutePolicy::kDeepServe) {
    return {PdMode::kPdColocated, std::nullopt, "colocated (baseline policy); "};
  }
  if (in.heatmap == nullptr) return {PdMode::kPdColocated, std::nullopt, "no heatmap; "};
  const double v = in.heatmap->lookup(in.prompt_tokens, in.predicted_decode_tokens);
  const bool disagg = v > in.config.pd_threshold;
  std::string why = std::string(disagg ? "disaggregated" : "colocated") + " (heatmap " +
                    fmt_double(v) + (disagg ? " > " : " <= ") + fmt_double(in.config.pd_threshold) +
                    "); ";
  return {disagg ? PdMode::kPdDisaggregated : PdMode::kPdColocated, v, why};
}

RouteDecision no_capacity(std::string reason) {
  RouteDecision d;
  d.branch = RouteBranch::kNoCapacity;
  d.reason = std::move(reason);
  return d;
}

}  // namespace

std::string_view route_policy_name(RoutePolicy policy) {
  switch (policy) {
    case RoutePolicy::kDeepServe:
      return "deepserve";
    case RoutePolicy::kRoundRobin:
      return "round_robin";
    case RoutePolicy::kLeastLoad:
      return "least_load";
    case RoutePolicy::kPrefix:
      return "prefix";
  }
  return "deepserve";
}

std::optional<RoutePolicy> parse_route_policy(std::string_view name) {
  for (RoutePolicy p : {RoutePolicy::kDeepServe, RoutePolicy::kRoundRobin, RoutePolicy::kLeastLoad,
                        RoutePolicy::kPrefix}) {
    if (route_policy_name(p) == name) return p;
  }
  return std::nullopt;
}

std::string_view pd_mode_name(PdMode mode) {
  switch (mode) {
    case PdMode::kPdColocated:
      return "colocated";
    case PdMode::kPdDisaggregated:
      return "disaggregated";
  }
  return "colocated";
}

std::string_view route_branch_name(RouteBranch branch) {
  switch (branch) {
    case RouteBranch::kSticky:
      return "sticky";
    case RouteBranch::kLocality:
      return "locality";
    case RouteBranch::kLeastLoad:
      return "least_load";
    case RouteBranch::kRoundRobin:
      return "round_robin";
    case RouteBranch::kNoCapacity:
      return "no_capacity";
  }
  return "no_capacity";
}

Status RouterConfig::validate() const {
  if (!(balance_threshold >= 0.0 && balance_threshold <= 1.0)) {
    return Status::invalid_argument("router balance_threshold must be in [0, 1], got " +
                                    fmt_double(balance_threshold));
  }
  if (!(balance_abs_tokens >= 0.0 && std::isfinite(balance_abs_tokens))) {
    return Status::invalid_argument("router balance_abs_tokens must be finite and >= 0, got " +
                                    fmt_double(balance_abs_tokens));
  }
  if (!(lower_tier_weight >= 0.0 && lower_tier_weight <= 1.0)) {
    return Status::invalid_argument("router lower_tier_weight must be in [0, 1], got " +
                                    fmt_double(lower_tier_weight));
  }
  if (!std::isfinite(pd_threshold)) {
    return Status::invalid_argument("router pd_threshold must be finite");
  }
  if (!(kv_pressure_tokens >= 0.0 && std::isfinite(kv_pressure_tokens))) {
    return Status::invalid_argument("router kv_pressure_tokens must be finite and >= 0, got " +
                                    fmt_double(kv_pressure_tokens));
  }
  if (!(sticky_slack_tokens >= 0.0 && std::isfinite(sticky_slack_tokens))) {
    return Status::invalid_argument("router sticky_slack_tokens must be finite and >= 0, got " +
                                    fmt_double(sticky_slack_tokens));
  }
  return Status();
}

namespace {

// Sticky first (router.h): the colocated TE holding the program's pin, unless it is not a healthy
// colocated TE of the model or is loaded past the bound; nullptr then.
const Candidate* sticky_choice(const std::vector<Candidate>& colocated, const RouteInput& in,
                               std::string* why) {
  if (in.sticky_te_id.empty() || colocated.empty()) return nullptr;
  const Candidate* sticky = nullptr;
  double least = colocated.front().load;
  for (const Candidate& c : colocated) {
    least = std::min(least, c.load);
    if (c.te->id == in.sticky_te_id) sticky = &c;
  }
  if (sticky == nullptr) return nullptr;
  const double bound = static_cast<double>(in.prompt_tokens) + in.config.sticky_slack_tokens;
  if (sticky->load - least > bound) return nullptr;
  *why = "sticky: the program's pin is on " + sticky->te->id + ", load " +
         fmt_double(sticky->load) + " (least " + fmt_double(least) + ")";
  return sticky;
}

// The group a request goes to when the model has colocated TEs and prefill/decode pairs but no
// heatmap: every colocated TE, and every prefill TE standing for its pair, its load counted with
// the least loaded decode TE's (a pair carries one request's prefill and decode, as one colocated
// TE does). The usual rule (locality when balanced, else least load) then picks in it.
std::vector<Candidate> pairs_as_replicas(const std::vector<Candidate>& colocated,
                                         const std::vector<Candidate>& prefill,
                                         const std::vector<Candidate>& decode) {
  double decode_load = decode.front().load;
  for (const Candidate& d : decode) decode_load = std::min(decode_load, d.load);
  std::vector<Candidate> group = colocated;
  for (Candidate p : prefill) {
    p.load += decode_load;
    group.push_back(p);
  }
  return group;
}

}  // namespace

RouteDecision route(const RouteInput& in) {
  const std::vector<Candidate> colocated = healthy_group(in, TeRole::kColocated);
  const std::vector<Candidate> prefill = healthy_group(in, TeRole::kPrefill);
  const std::vector<Candidate> decode = healthy_group(in, TeRole::kDecode);
  const bool has_pair = !prefill.empty() && !decode.empty();
  RouteDecision d;
  if (std::string why; const Candidate* sticky = sticky_choice(colocated, in, &why)) {
    d.branch = RouteBranch::kSticky;
    d.pd = PdMode::kPdColocated;
    d.te_id = sticky->te->id;
    d.match = sticky->match;
    d.reason = std::move(why);
    return d;
  }
  if (colocated.empty() && !has_pair) {
    // A PD fleet short of one role (its decode TE died; the replacement is starting): a TE of the
    // other role runs the whole request, as a colocated TE would — every role's engine can.
    const std::vector<Candidate>& lone = !prefill.empty() ? prefill : decode;
    if (lone.empty()) {
      return no_capacity("no healthy TE for model \"" + std::string(in.model) + "\"");
    }
    const Pick pick = pick_in_group(lone, in);
    d.branch = pick.branch;
    d.pd = PdMode::kPdColocated;
    d.te_id = pick.chosen->te->id;
    d.match = pick.chosen->match;
    d.role_fallback = true;
    d.reason = std::string(!prefill.empty() ? "no decode TE: the whole request on a prefill TE; "
                                            : "no prefill TE: the whole request on a decode TE; ") +
               pick.why;
    return d;
  }
  const PdChoice pd = choose_pd(!colocated.empty(), has_pair, in);
  // Both kinds and no heatmap: the pairs are replicas beside the colocated TEs.
  const bool unmapped = !colocated.empty() && has_pair && in.heatmap == nullptr &&
                        in.config.policy == RoutePolicy::kDeepServe;
  const std::vector<Candidate> mixed =
      unmapped ? pairs_as_replicas(colocated, prefill, decode) : std::vector<Candidate>{};
  const bool disagg_kind = pd.mode == PdMode::kPdDisaggregated;
  const Pick pick = pick_in_group(unmapped ? mixed : (disagg_kind ? prefill : colocated), in);
  const bool disagg = unmapped ? pick.chosen->te->role == TeRole::kPrefill : disagg_kind;
  d.branch = pick.branch;
  d.pd = disagg ? PdMode::kPdDisaggregated : PdMode::kPdColocated;
  d.te_id = pick.chosen->te->id;
  d.match = pick.chosen->match;
  d.heatmap_value = pd.heatmap_value;
  d.reason = (unmapped ? std::string(disagg ? "disaggregated" : "colocated") +
                             " (no heatmap: pairs are replicas); "
                       : pd.why) +
             pick.why;
  if (disagg) {
    const Candidate* dec = pick_decode(decode, in);
    d.decode_te_id = dec->te->id;
    d.reason += "; decode " + d.decode_te_id + " load " + fmt_double(dec->load);
  }
  return d;
}

void RouterCounters::record(const RouteDecision& decision) {
  switch (decision.branch) {
    case RouteBranch::kSticky:
      ++sticky;
      break;
    case RouteBranch::kLocality:
      ++locality;
      break;
    case RouteBranch::kLeastLoad:
      ++least_load;
      break;
    case RouteBranch::kRoundRobin:
      ++round_robin;
      break;
    case RouteBranch::kNoCapacity:
      ++no_capacity;
      return;
  }
  if (decision.role_fallback) ++role_fallback;
  switch (decision.pd) {
    case PdMode::kPdColocated:
      ++pd_colocated;
      break;
    case PdMode::kPdDisaggregated:
      ++pd_disaggregated;
      break;
  }
  matched_blocks += decision.match.num_blocks;
  matched_pool_blocks += decision.match.num_pool_blocks;
}

}  // namespace keel::cluster
