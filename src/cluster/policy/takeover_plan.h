// Takeover plan: what a cluster manager that has just won the election (a standby taking over, or
// the first leader) must start so that the cluster runs the TEs it asks for, given the TEs already
// in the membership — those a previous leader started through the node agents keep running under
// their own leases and are adopted, not started twice. A pure step function: wanted roles and
// live TEs in, the TEs to start (with ids no live TE holds) out; tested without processes.
//
// Invariant: every live TE is matched to at most one wanted TE of its role; a wanted TE is
// started only when no unmatched live TE of its role is left.
#pragma once

#include <string>
#include <vector>

namespace keel::cluster {

// A TE registered in the membership for the cluster's model.
struct LiveTe {
  std::string id;    // its member id (te/<id>)
  std::string role;  // colocated | prefill | decode
};

// A TE to start: its index in the wanted list and a fresh id.
struct TeToStart {
  size_t wanted_idx = 0;
  std::string id;
};

struct TakeoverPlan {
  std::vector<TeToStart> start;      // in wanted order
  std::vector<std::string> adopted;  // ids of the live TEs that stand for wanted ones
};

// `wanted_roles`: one role per TE the cluster asks for. New ids are `id_prefix` + N with the
// smallest N that no live TE and no earlier new TE uses (cluster up passes "<model>-te-").
TakeoverPlan plan_takeover(const std::vector<std::string>& wanted_roles,
                           const std::vector<LiveTe>& live, const std::string& id_prefix = "te-");

}  // namespace keel::cluster
