// Gang placement: where the processes of one serving instance run — a prefill + decode pair, a
// pipeline-parallel TE's stage processes, or a lone colocated TE (a gang of one) — all or nothing,
// over a resource model of cores and memory per host. A pure step function: hosts (their declared
// room and the processes they run, each with its instance's priority and whether that instance is
// idle) and a gang in; a host per process plus the instances to evict first out.
//
// Policy (Kubernetes' scheduler with PriorityClass preemption, reduced to what keel needs):
//  - A host's room is its cores, memory and process slots minus what its processes reserve
//    (reservations, as K8s requests, not measured use).
//  - If the gang fits as the hosts stand, nothing is evicted. Otherwise the fewest victim
//    instances that make it fit are chosen; among sets of that size the cheapest (lowest summed
//    priority, then the least cores and memory freed, then instance ids in order).
//  - Only idle instances of strictly lower priority are victims; an instance is idle only when
//    every one of its processes is, and its priority is the highest of its processes'. A process
//    with no queue of its own (a pipeline's later stage, `follows_instance`) is as idle as the
//    rest of its instance; an instance made only of such processes is never idle.
//  - Processes go largest first (cores, then memory) to the host with the most free cores, then
//    memory, then the smallest host id, backtracking so a fit is found whenever one exists.
//  - A spread gang (an expert-parallel TE and its members: each host then holds one share of the
//    experts) puts each process on a host of its own when the hosts allow it with as few victims
//    as packing would need; else it is packed as any gang (never one more eviction to spread).
// Every tie is broken by ids, so equal inputs give equal plans.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace keel::cluster {

// One process a host runs now.
struct HostedProcess {
  std::string id;        // its TE id
  std::string instance;  // the instance (gang) it belongs to; "" = its own id
  int32_t priority = 0;  // its instance's priority (higher wins)
  int32_t cores = 1;     // cores it reserves
  int64_t memory_bytes = 0;
  bool idle = false;  // it has no request queued or running (as its JE reports)
  // No queue of its own (a pipeline-parallel TE's stage 1): `idle` is not consulted.
  bool follows_instance = false;
  friend bool operator==(const HostedProcess&, const HostedProcess&) = default;
};

struct GangHost {
  std::string host_id;
  int32_t cores = 0;                // cores the host offers
  int64_t memory_bytes = 0;         // memory the host offers
  int32_t max_processes = 1 << 20;  // process slots (a node agent's --max-tes)
  std::vector<HostedProcess> running;
};

// One process of the gang.
struct GangProcess {
  std::string name;  // e.g. "prefill", "decode", "stage-1" (messages only)
  int32_t cores = 1;
  int64_t memory_bytes = 0;
};

struct GangRequest {
  std::string instance;  // the new instance's id
  int32_t priority = 0;
  std::vector<GangProcess> processes;  // >= 1
  bool spread = false;                 // each process on a host of its own where possible
};

struct GangPlan {
  std::vector<std::string> hosts;  // host id of each process, in request order
  std::vector<std::string> evict;  // instances to drain and stop first (sorted)
  friend bool operator==(const GangPlan&, const GangPlan&) = default;
};

// The most victim candidates considered (the lowest-priority, smallest first); more are ignored.
inline constexpr size_t kMaxEvictionCandidates = 16;

// The plan, ResourceExhausted naming each host's free room and the evictable instances when no
// plan exists (nothing is placed then), InvalidArgument for a malformed request.
Result<GangPlan> place_gang(const std::vector<GangHost>& hosts, const GangRequest& request);

}  // namespace keel::cluster
