// What `keel cluster up` starts as children (cluster_up.h): its TEs — forked here, or with
// --nodes auto through the node agents, each instance placed as a gang and a previous leader's
// adopted — and its JEs, given every TE's address; and their registration in the membership.
// Each child prints its port on a ready line; one that does not start in time fails the start.
//
// Thread safety: call from cluster up's thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "cluster/policy/je_replacement.h"
#include "control/manager/cluster_membership.h"
#include "control/placement/cluster_nodes.h"
#include "control/repair/cluster_health.h"
#include "control/up/up_options.h"
#include "core/result.h"
#include "membership/membership.h"
#include "proc/process_supervisor.h"

namespace keel::control {

struct UpTree {
  std::vector<std::string> te_names, je_names, te_addresses, je_addresses;
  StartedTes tes;                       // for the replacer
  std::vector<cluster::ManagedJe> jes;  // for the JE replacer
  // Started TEs that mapped the store entry and serve it (fork sources): pid, weights service.
  std::vector<std::pair<pid_t, std::string>> weights_sources;
};

// --nodes auto: the TEs of `kinds` (up_plan.h's te_kinds) through the node agents in the
// membership, not forked here. With none of the model registered, each instance is placed as a
// gang (cluster_nodes.h, model_gangs); those still registered (a previous leader's) are adopted
// and only the missing ones started. TE and instance ids carry the model's name, so several
// models' managers share the agents. Fills t->te_addresses.
Status start_remote_tes(ClusterNodes& nodes, membership::Membership& session,
                        const ClusterUpOptions& o, const std::string& path, const std::string& name,
                        const std::vector<std::string>& kinds, int threads, UpTree* t);

// The TEs (forked by `sup` running `keel`, or through the agents) and then the JEs of `o`.
// `leading` false: a --nodes auto standby — its JEs only (they follow the TEs in the membership).
// InvalidArgument for flag combinations the plan refuses, before any child starts.
Result<UpTree> start_children(proc::ProcessSupervisor& sup, const ClusterUpOptions& o,
                              const std::vector<std::string>& keel, const std::string& path,
                              const std::string& name, ClusterNodes& nodes,
                              ClusterMembership& members, bool leading);

// Registers the started JEs and TEs in the membership on their behalf (embedded mode: with etcd
// they register themselves).
Status register_tree(ClusterMembership& members, const UpTree& tree, const std::string& name,
                     const MembershipConfig& o);

}  // namespace keel::control
