// Placement: which hosts run the task executors the cluster manager wants, given the capacity
// their node agents report (node_capacity.h). A pure step function — nodes and a request in, one
// host per TE out — so it is tested without processes or etcd.
//
// Policy: TEs go one at a time to the host with the most free TE slots left, where a host's slots
// are the fewer of (max_tes - running_tes) and (cores / threads_per_te - running_tes); ties go to
// a host whose store already holds the model (its entry name contains `model_hint`), then by
// host id, so the result is deterministic. Hosts with no slot are skipped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/policy/node_capacity.h"
#include "core/result.h"

namespace keel::cluster {

struct PlacementRequest {
  int32_t tes = 0;             // TEs to place, >= 1
  int32_t threads_per_te = 1;  // cores each TE uses, >= 1
  std::string model_hint;      // a substring of the model's store entry name; "" = none
};

// The host id of each TE, in request order. ResourceExhausted (with every host's free slots) when
// the hosts cannot take them all; InvalidArgument for a malformed request.
Result<std::vector<std::string>> place_tes(const std::vector<NodeCapacity>& nodes,
                                           const PlacementRequest& request);

}  // namespace keel::cluster
