// ClusterNodes: `keel cluster up --nodes auto` — the cluster manager's side of the node agents.
// It reads the agents registered in the membership (node/<host-id>, their capacity), places the
// TEs with the pure step function cluster/placement.h, asks each chosen agent to start its TE
// (start_te over a link) and, at shutdown, to stop it (stop_te; an agent that cannot be reached —
// its host cut off — is logged and skipped: its TEs are gone with its lease). A manager that takes
// over from another (take_over) adopts the TEs of its model that are still registered — a
// previous leader started them and they outlive it — and starts only the rest
// (cluster/takeover_plan.h); adopted TEs are stopped at shutdown like started ones, through the
// agent on their host.
//
// Thread safety: one owner (cluster_up's thread).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cluster/link.h"
#include "cluster/node_capacity.h"
#include "cluster/node_messages.h"
#include "core/result.h"
#include "membership/membership.h"

namespace keel::cli {

// A TE started through an agent.
struct RemoteTe {
  std::string id;
  std::string host_id;
  std::string address;  // its control endpoint
  int64_t pid = 0;      // on its host
};

class ClusterNodes {
 public:
  ClusterNodes() = default;
  ~ClusterNodes() { stop_all(std::chrono::milliseconds(5000)); }
  ClusterNodes(const ClusterNodes&) = delete;
  ClusterNodes& operator=(const ClusterNodes&) = delete;

  // The agents registered now (their capacity decoded; a malformed one is skipped, logged).
  static Result<std::vector<cluster::NodeCapacity>> list(membership::Membership& session);

  // Places `starts` (their threads: starts[0].threads) over `nodes` and starts each through its
  // agent, in order; the first failure stops the ones started and is returned.
  Result<std::vector<RemoteTe>> start(const std::vector<cluster::NodeCapacity>& nodes,
                                      const std::vector<cluster::StartTe>& starts,
                                      std::chrono::milliseconds timeout);
  // The manager's TEs after it won the election: `wanted` (ids ignored) matched against the TEs
  // of `model` registered now; the live ones adopted, the rest placed and started with fresh ids
  // (cluster/takeover_plan.h). *adopted (optional): how many were adopted.
  Result<std::vector<RemoteTe>> take_over(membership::Membership& session, const std::string& model,
                                          std::vector<cluster::StartTe> wanted,
                                          std::chrono::milliseconds timeout, size_t* adopted);
  // Drops every TE started or adopted here without stopping it (another manager leads now).
  void forget();
  // Stops every TE started or adopted here through its agent (best effort).
  void stop_all(std::chrono::milliseconds grace);

 private:
  Result<std::shared_ptr<cluster::Link>> link_to(const std::string& address);

  std::map<std::string, std::shared_ptr<cluster::Link>> links_;  // by agent address
  std::vector<std::pair<std::string, RemoteTe>> started_;        // agent address, TE
};

}  // namespace keel::cli
