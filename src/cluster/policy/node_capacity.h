// NodeCapacity: what one host offers the cluster, as its node agent (`keel node-agent`) reports it
// in the membership (node/<host-id>, the fields as string attributes): cores, memory, the model
// entries in its shared-memory store, and its task executors (running, warm, the most it may run;
// each running one with the instance it belongs to, its priority and its reserved cores and
// memory, for gang placement: gang_placement.h).
// Plain data and pure functions: the agent reads /proc and the store and fills the struct; the
// cluster manager decodes members back into it for placement (placement.h).
//
// Invariants of a decoded capacity: cores >= 1, max_tes >= 0, running_tes >= 0, warm_tes >= 0,
// memory_available_bytes <= memory_total_bytes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace keel::cluster {

// A TE a node agent started and that runs, as its start_te asked (node_messages.h).
struct HostedTe {
  std::string id;
  std::string instance;      // the instance (gang) it belongs to
  int32_t priority = 0;      // its instance's priority
  int32_t threads = 1;       // cores it reserves
  int64_t memory_bytes = 0;  // memory it reserves
  // What it runs: a TE's role (colocated | prefill | decode), or "pp-stage" for a
  // pipeline-parallel TE's stage 1 (`keel pp-stage`: no queue, no JE reports it).
  std::string role = "colocated";
  bool operator==(const HostedTe&) const = default;
};

inline constexpr size_t kMaxStoppedIds = 32;

struct NodeCapacity {
  std::string host_id;                 // the agent's --host-id (its member id)
  std::string address;                 // the agent's control endpoint "host:port"
  int32_t cores = 1;                   // CPUs this host's TEs may use
  int64_t memory_total_bytes = 0;      // MemTotal, or the agent's --memory-bytes when smaller
  int64_t memory_available_bytes = 0;  // MemAvailable when reported
  std::vector<std::string> models;     // the entry names in its model store (sorted)
  int32_t max_tes = 0;                 // the most TEs the agent starts (its --max-tes)
  int32_t running_tes = 0;             // TEs it started that are serving
  int32_t warm_tes = 0;                // idle warm TEs in its pool
  std::vector<HostedTe> tes;           // the running TEs (by id); absent from older agents
  // The ids of the processes it stopped on a manager's stop_te lately (the last
  // kMaxStoppedIds, oldest first): gone on purpose (an eviction, a drain), not lost.
  std::vector<std::string> stopped;
  bool operator==(const NodeCapacity&) const = default;
};

// The value of `field` ("MemTotal", "MemAvailable") in /proc/meminfo's text, in bytes (the file
// gives kB). NotFound when absent, InvalidArgument when the line is malformed.
Result<int64_t> parse_meminfo_field(std::string_view meminfo, std::string_view field);

// The attributes a node member carries, and back (InvalidArgument naming the attribute).
std::map<std::string, std::string> capacity_attributes(const NodeCapacity& c);
Result<NodeCapacity> capacity_from_attributes(const std::string& host_id,
                                              const std::string& address,
                                              const std::map<std::string, std::string>& attrs);

}  // namespace keel::cluster
