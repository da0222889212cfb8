// ClusterNodes: `keel cluster up --nodes auto` — the cluster manager's side of the node agents.
// It reads the agents registered in the membership (node/<host-id>, their capacity), places each
// instance as a gang — all of its TEs or none: a colocated TE alone, a prefill + decode pair
// together, a pipeline-parallel TE with its stage-1 process, an expert-parallel TE with its expert
// members (instance_gangs.h; members started first, the TE then given their addresses) — with the
// pure step function
// cluster/policy/gang_placement.h over cores and memory per host, evicts first the idle
// lower-priority instances the plan names, asks each chosen agent to start its TE (start_te over a
// link) and, at shutdown, to stop it (stop_te; an agent that cannot be reached — its host cut off —
// is logged and skipped: its TEs are gone with its lease). A manager that takes over from another
// (take_over) adopts the TEs of its model that are still registered — a previous leader started
// them and they outlive it — and starts only the rest (cluster/policy/takeover_plan.h, placed one
// by one with cluster/policy/placement.h); adopted TEs are stopped at shutdown like started ones,
// through the agent on their host.
//
// An instance is idle when every JE in the membership that lists its TEs reports none of them
// with a request queued or running (a TE no JE reports is taken as busy: never evicted unseen).
// An eviction drains: remove_te to those JEs (no new task), stop_te through the TE's agent
// (SIGTERM: the TE finishes what it runs, SIGKILL after the grace), then remove_te with forget.
// Fencing: every start_te and stop_te carries the manager's fencing token (config.fence), and a
// manager announces it to every agent (announce, the `fence` call) before it places or adopts TEs;
// an agent refuses a command with a lower token than it has seen (cluster/policy/leader_fence.h),
// so a manager that stalled past its lease cannot stop or start TEs behind its successor's back.
// The gangs it placed are kept (placed_gangs): stopping any process of a gang that serves only
// together (a TE with its stage or members) stops the whole gang (stop_te, stop_gang;
// gang_watch.h replaces such a gang when it lost a process).
// Each eviction and placement is a JSON line in the event log ({"event":"evict"} before
// {"event":"gang_placed"}; {"event":"gang_unplaceable"} with the reason) and a /metrics counter.
//
// Thread safety: one owner (cluster_up's thread); metrics_text() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cluster/policy/node_capacity.h"
#include "cluster/protocol/node_messages.h"
#include "control/manager/caller.h"
#include "control/placement/instance_gangs.h"
#include "core/clock.h"
#include "core/result.h"
#include "membership/membership.h"

namespace keel::control {

// A TE started through an agent.
struct RemoteTe {
  std::string id;
  std::string host_id;
  std::string address;  // its control endpoint
  int64_t pid = 0;      // on its host
  std::string role;     // as started: a TE's role, or kPpStageRole / kEpExpertRole (not a TE)
};

// A gang this manager placed and started, as it is now.
struct PlacedGang {
  GangStart start;  // as asked (an expert-parallel TE without its members' addresses)
  std::vector<RemoteTe> processes;  // in the gang's order
};

struct ClusterNodesConfig {
  std::string model;                                // the served model name (metrics labels)
  std::string event_log;                            // JSON lines, appended; "" = none
  std::chrono::milliseconds drain_grace{10000};     // an evicted TE's SIGTERM → SIGKILL
  std::chrono::milliseconds call_timeout{5000};     // a JE's fleet / remove_te call
  std::chrono::milliseconds start_timeout{120000};  // an agent's start_te call
  std::string election;                             // the manager's election (fencing)
  std::function<int64_t()> fence;                   // its fencing token now; none: 0
  // The agents' and JEs' calls (caller.h); none: a LinkCaller. Tests pass fake peers.
  std::shared_ptr<Caller> caller;
  const Clock* clock = nullptr;  // times evictions; none: the steady clock
};

class ClusterNodes {
 public:
  explicit ClusterNodes(ClusterNodesConfig config = {});
  ~ClusterNodes() { stop_all(std::chrono::milliseconds(5000)); }
  ClusterNodes(const ClusterNodes&) = delete;
  ClusterNodes& operator=(const ClusterNodes&) = delete;

  // The agents registered now (their capacity decoded; a malformed one is skipped, logged).
  static Result<std::vector<cluster::NodeCapacity>> list(membership::Membership& session);

  // Tells every registered agent this manager's fencing token (the `fence` call, all agents at
  // once, 1 s each): from then on each refuses its predecessors' commands. An agent that cannot be
  // reached in time is logged and skipped (a cut-off host learns the token with the next command
  // it gets); one that has seen a higher token makes this FailedPrecondition (this manager is
  // stale and must not act).
  Status announce(membership::Membership& session);
  // Places and starts each gang in order (evicting first what its plan names); the first failure
  // stops the TEs started here and is returned (ResourceExhausted when a gang fits nowhere).
  Result<std::vector<RemoteTe>> start_gangs(membership::Membership& session,
                                            const std::vector<GangStart>& gangs);
  // Places and starts one gang over the hosts as they stand now (the autoscaler's scale-out); a
  // failure stops only what this gang started and is returned.
  Result<std::vector<RemoteTe>> start_gang(membership::Membership& session, const GangStart& g);
  // Stops one TE started or adopted here through its agent (SIGTERM, SIGKILL after `grace`) and
  // forgets it — with the rest of its gang when that gang serves only together (a TE with its
  // stage or members: stop_gang); NotFound when it is not one of them.
  Status stop_te(const std::string& id, std::chrono::milliseconds grace);
  // Stops every process of placed gang `instance` through its agent (one already gone counts as
  // stopped), tells the JEs that list its TEs to forget them, and forgets the gang; NotFound when
  // no such gang was placed here. The first failure is returned (after trying every process).
  Status stop_gang(const std::string& instance, std::chrono::milliseconds grace,
                   membership::Membership* session = nullptr);
  // The gangs placed here and not stopped, by instance.
  [[nodiscard]] const std::map<std::string, PlacedGang>& placed_gangs() const { return gangs_; }
  // Appends one JSON line (with "unix_s") to the event log, when there is one.
  void log_event(cluster::Json event);
  // The manager's TEs after it won the election: `wanted` (ids ignored) matched against the TEs
  // of `model` registered now; the live ones adopted, the rest started with fresh ids
  // (cluster/policy/takeover_plan.h), each as a gang of its own at `priority` (a missing prefill TE
  // is not re-paired with a missing decode TE). *adopted (optional): how many were adopted.
  Result<std::vector<RemoteTe>> take_over(membership::Membership& session, const std::string& model,
                                          std::vector<cluster::StartTe> wanted, int32_t priority,
                                          size_t* adopted);
  // Drops every TE started or adopted here without stopping it (another manager leads now).
  void forget();
  // Stops every TE started or adopted here through its agent (best effort).
  void stop_all(std::chrono::milliseconds grace);

  [[nodiscard]] std::string metrics_text() const;

 private:
  // Where a TE is listed: the JEs that report it, and whether all of them find it idle.
  struct TeUse {
    bool idle = true;
    std::vector<std::pair<std::string, std::string>> listed;  // JE address, TE address
  };

  std::map<std::string, TeUse> te_use(membership::Membership& session);
  Status evict(const std::string& instance, const GangStart& for_gang,
               std::vector<cluster::NodeCapacity>& nodes, const std::map<std::string, TeUse>& use);
  Result<RemoteTe> start_one(const cluster::NodeCapacity& node, cluster::StartTe start);
  // Places gang `g` over `nodes` (updated with what it starts) and starts it; no stop_all.
  Result<std::vector<RemoteTe>> place_and_start(const GangStart& g,
                                                std::vector<cluster::NodeCapacity>& nodes,
                                                const std::map<std::string, TeUse>& use);
  int64_t fence() const { return config_.fence ? config_.fence() : 0; }
  // A stop_te for `id`, fenced with this manager's election and token (every stop goes through it).
  cluster::StopTe stop_request(const std::string& id, std::chrono::milliseconds grace) const {
    return {id, static_cast<int32_t>(grace.count()), config_.election, fence()};
  }

  ClusterNodesConfig config_;
  std::shared_ptr<Caller> caller_;
  SteadyClock steady_;
  const Clock* clock_;
  std::vector<std::pair<std::string, RemoteTe>> started_;  // agent address, TE
  std::map<std::string, PlacedGang> gangs_;                // by instance
  std::atomic<int64_t> placed_{0};
  std::atomic<int64_t> evicted_{0};
  std::atomic<int64_t> unplaceable_{0};
};

}  // namespace keel::control
