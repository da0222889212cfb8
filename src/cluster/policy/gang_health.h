// Gang health: whether every process of a placed gang (gang_placement.h: a pipelined TE and its
// stage, an expert-parallel TE and its members, a prefill + decode pair) still runs, judged from
// what the hosts' node agents report (each agent lists the processes it started and that still
// run: node_capacity.h, `tes`). A pure step function over plain structs: the gang's processes
// with what earlier checks saw, and the hosts listed now, in; the processes lost out.
//
// Rules, per process:
//  - its host is not listed (the agent's lease is gone: host cut off, agent dead) → lost;
//  - its host lists it → seen (it runs);
//  - its host lists it as stopped on a manager's command (node_capacity.h, `stopped`) → stopped:
//    gone on purpose (another manager evicted the gang, an operator stopped it), not lost;
//  - its host does not list it: lost when an earlier check saw it (it exited); never seen yet (an
//    agent publishes its list after it answered the start) → lost only after more than
//    `max_unseen_checks` such checks in a row (it died before any check saw it).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace keel::cluster {

// One process of a gang as the checks have seen it.
struct WatchedProcess {
  std::string id;
  std::string host_id;
  bool seen = false;          // some check found it running
  int32_t unseen_checks = 0;  // checks in a row that did not find it, before it was first seen
  friend bool operator==(const WatchedProcess&, const WatchedProcess&) = default;
};

// A host as listed now: its id, the ids of the processes its agent runs, and of those it stopped
// on a manager's command lately.
struct HostProcesses {
  std::string host_id;
  std::vector<std::string> running;
  std::vector<std::string> stopped;
};

// One check's verdict, ids in the gang's order.
struct GangCheck {
  std::vector<std::string> lost;     // exited on their own, or their host is gone
  std::vector<std::string> stopped;  // stopped on a manager's command
};

// Updates `processes` with this check and returns what is gone.
[[nodiscard]] GangCheck check_gang(std::vector<WatchedProcess>& processes,
                                   const std::vector<HostProcesses>& hosts,
                                   int32_t max_unseen_checks);

}  // namespace keel::cluster
