// check_gang; see gang_health.h.
#include "cluster/policy/gang_health.h"

#include <algorithm>

namespace keel::cluster {

GangCheck check_gang(std::vector<WatchedProcess>& processes,
                     const std::vector<HostProcesses>& hosts, int32_t max_unseen_checks) {
  GangCheck out;
  std::vector<std::string>& lost = out.lost;
  for (WatchedProcess& p : processes) {
    const auto host = std::find_if(hosts.begin(), hosts.end(),
                                   [&](const HostProcesses& h) { return h.host_id == p.host_id; });
    if (host == hosts.end()) {  // the host is gone, and everything it ran with it
      lost.push_back(p.id);
      continue;
    }
    if (std::find(host->running.begin(), host->running.end(), p.id) != host->running.end()) {
      p.seen = true;
      p.unseen_checks = 0;
      continue;
    }
    if (std::find(host->stopped.begin(), host->stopped.end(), p.id) != host->stopped.end()) {
      out.stopped.push_back(p.id);
    } else if (p.seen || ++p.unseen_checks > max_unseen_checks) {
      lost.push_back(p.id);
    }
  }
  return out;
}

}  // namespace keel::cluster
