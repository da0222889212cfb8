// place_gang; see gang_placement.h.
#include "cluster/policy/gang_placement.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

namespace keel::cluster {
namespace {

struct Room {
  int64_t cores = 0;
  int64_t memory = 0;
  int64_t slots = 0;
};

// An instance that may be evicted: what it frees on each host.
struct Victim {
  std::string instance;
  int32_t priority = 0;
  int64_t cores = 0;  // summed over its processes
  int64_t memory = 0;
  std::map<size_t, Room> freed;  // by host index
};

std::string instance_of(const HostedProcess& p) { return p.instance.empty() ? p.id : p.instance; }

std::vector<Room> free_room(const std::vector<GangHost>& hosts) {
  std::vector<Room> out;
  for (const GangHost& h : hosts) {
    Room r{h.cores, h.memory_bytes, h.max_processes};
    for (const HostedProcess& p : h.running) {
      r.cores -= p.cores;
      r.memory -= p.memory_bytes;
      r.slots -= 1;
    }
    out.push_back(r);
  }
  return out;
}

// Idle instances of priority below `priority`, cheapest first, at most kMaxEvictionCandidates.
std::vector<Victim> victims(const std::vector<GangHost>& hosts, int32_t priority) {
  std::map<std::string, Victim> by_id;
  std::set<std::string> busy, seen;  // seen: instances with a process that has a queue
  for (size_t h = 0; h < hosts.size(); ++h) {
    for (const HostedProcess& p : hosts[h].running) {
      const std::string id = instance_of(p);
      Victim& v = by_id[id];
      if (v.instance.empty()) {
        v.instance = id;
        v.priority = p.priority;
      }
      v.priority = std::max(v.priority, p.priority);
      v.cores += p.cores;
      v.memory += p.memory_bytes;
      Room& r = v.freed[h];
      r.cores += p.cores;
      r.memory += p.memory_bytes;
      r.slots += 1;
      if (p.follows_instance) continue;
      seen.insert(id);
      if (!p.idle) busy.insert(id);
    }
  }
  std::vector<Victim> out;
  for (auto& [id, v] : by_id) {
    if (seen.count(id) > 0 && busy.count(id) == 0 && v.priority < priority) {
      out.push_back(std::move(v));
    }
  }
  std::sort(out.begin(), out.end(), [](const Victim& a, const Victim& b) {
    return std::tie(a.priority, a.cores, a.memory, a.instance) <
           std::tie(b.priority, b.cores, b.memory, b.instance);
  });
  if (out.size() > kMaxEvictionCandidates) out.resize(kMaxEvictionCandidates);
  return out;
}

// Assigns processes order[k..] to hosts (backtracking); true when all fit. `host_of` is indexed
// by process, `room` is consumed as processes are placed and restored on the way back.
// With `apart`, a host that holds one of the gang's processes already takes no other.
bool assign(const std::vector<GangHost>& hosts, const std::vector<GangProcess>& procs,
            const std::vector<size_t>& order, size_t k, std::vector<Room>& room,
            std::vector<size_t>& host_of, bool apart) {
  if (k == order.size()) return true;
  const GangProcess& p = procs[order[k]];
  std::vector<size_t> candidates;
  for (size_t h = 0; h < hosts.size(); ++h) {
    const bool taken =
        apart && std::any_of(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k),
                             [&](size_t placed) { return host_of[placed] == h; });
    if (!taken && room[h].cores >= p.cores && room[h].memory >= p.memory_bytes &&
        room[h].slots >= 1) {
      candidates.push_back(h);
    }
  }
  std::sort(candidates.begin(), candidates.end(), [&](size_t a, size_t b) {
    return std::make_tuple(-room[a].cores, -room[a].memory, hosts[a].host_id) <
           std::make_tuple(-room[b].cores, -room[b].memory, hosts[b].host_id);
  });
  for (size_t h : candidates) {
    room[h].cores -= p.cores;
    room[h].memory -= p.memory_bytes;
    room[h].slots -= 1;
    host_of[order[k]] = h;
    if (assign(hosts, procs, order, k + 1, room, host_of, apart)) return true;
    room[h].cores += p.cores;
    room[h].memory += p.memory_bytes;
    room[h].slots += 1;
  }
  return false;
}

// The hosts of the gang's processes when it fits into `room`, else nothing.
std::optional<std::vector<size_t>> fit(const std::vector<GangHost>& hosts,
                                       const std::vector<GangProcess>& procs,
                                       std::vector<Room> room, bool apart) {
  std::vector<size_t> order(procs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::make_tuple(procs[a].cores, procs[a].memory_bytes) >
           std::make_tuple(procs[b].cores, procs[b].memory_bytes);
  });
  std::vector<size_t> host_of(procs.size(), 0);
  if (!assign(hosts, procs, order, 0, room, host_of, apart)) return std::nullopt;
  return host_of;
}

// The cost of evicting a set (compared lexicographically; the set's size is fixed by the caller).
using Cost = std::tuple<int64_t, int64_t, int64_t, std::vector<std::string>>;

Cost cost_of(const std::vector<Victim>& vs, const std::vector<size_t>& pick) {
  Cost c{0, 0, 0, {}};
  for (size_t i : pick) {
    std::get<0>(c) += vs[i].priority;
    std::get<1>(c) += vs[i].cores;
    std::get<2>(c) += vs[i].memory;
    std::get<3>(c).push_back(vs[i].instance);
  }
  std::sort(std::get<3>(c).begin(), std::get<3>(c).end());
  return c;
}

// Calls `each` with every k-subset of [0, n), in lexicographic order.
template <typename F>
void for_each_subset(size_t n, size_t k, F&& each) {
  std::vector<size_t> pick(k);
  std::iota(pick.begin(), pick.end(), size_t{0});
  while (true) {
    each(pick);
    size_t i = k;
    while (i > 0 && pick[i - 1] == n - k + i - 1) --i;
    if (i == 0) return;
    ++pick[i - 1];
    for (size_t j = i; j < k; ++j) pick[j] = pick[j - 1] + 1;
  }
}

std::string describe(const std::vector<GangHost>& hosts, const std::vector<Room>& room,
                     const std::vector<Victim>& vs) {
  std::string out;
  for (size_t h = 0; h < hosts.size(); ++h) {
    out += (out.empty() ? "" : ", ") + hosts[h].host_id + ": " + std::to_string(room[h].cores) +
           " cores, " + std::to_string(room[h].memory >> 20) + " MiB, " +
           std::to_string(room[h].slots) + " slots free";
  }
  if (hosts.empty()) out = "no hosts";
  std::string ev;
  for (const Victim& v : vs) {
    ev += (ev.empty() ? "" : ", ") + v.instance + " (priority " + std::to_string(v.priority) + ")";
  }
  return out + "; evictable: " + (ev.empty() ? "none" : ev);
}

Status validate(const GangRequest& r) {
  if (r.processes.empty()) {
    return Status::invalid_argument("gang placement: instance '" + r.instance +
                                    "' has no processes");
  }
  for (const GangProcess& p : r.processes) {
    if (p.cores < 1 || p.memory_bytes < 0) {
      return Status::invalid_argument("gang placement: process '" + p.name + "' of '" + r.instance +
                                      "' needs >= 1 core and >= 0 bytes");
    }
  }
  return {};
}

}  // namespace

Result<GangPlan> place_gang(const std::vector<GangHost>& hosts, const GangRequest& request) {
  KEEL_TRY(validate(request));
  const std::vector<Room> room = free_room(hosts);
  const std::vector<Victim> vs = victims(hosts, request.priority);
  const auto plan = [&](const std::vector<size_t>& host_of, const std::vector<size_t>& pick) {
    GangPlan p;
    for (size_t h : host_of) p.hosts.push_back(hosts[h].host_id);
    p.evict = std::get<3>(cost_of(vs, pick));
    return p;
  };
  // The fewest victims first; for each count, a spread gang apart before packed (never one more
  // eviction to spread it).
  for (size_t k = 0; k <= vs.size(); ++k) {
    for (const bool apart : {true, false}) {
      if (apart && !request.spread) continue;
      std::optional<std::pair<Cost, GangPlan>> best;
      for_each_subset(vs.size(), k, [&](const std::vector<size_t>& pick) {
        std::vector<Room> r = room;
        for (size_t i : pick) {
          for (const auto& [h, freed] : vs[i].freed) {
            r[h].cores += freed.cores;
            r[h].memory += freed.memory;
            r[h].slots += freed.slots;
          }
        }
        const std::optional<std::vector<size_t>> host_of = fit(hosts, request.processes, r, apart);
        if (!host_of) return;
        Cost c = cost_of(vs, pick);
        if (!best || c < best->first) best.emplace(std::move(c), plan(*host_of, pick));
      });
      if (best) return best->second;
    }
  }
  int64_t cores = 0, memory = 0;
  for (const GangProcess& p : request.processes) {
    cores += p.cores;
    memory += p.memory_bytes;
  }
  return Status::resource_exhausted(
      "gang placement: instance '" + request.instance + "' (priority " +
      std::to_string(request.priority) + ", " + std::to_string(request.processes.size()) +
      " processes, " + std::to_string(cores) + " cores, " + std::to_string(memory >> 20) +
      " MiB) fits nowhere, even after evicting every idle lower-priority instance (" +
      describe(hosts, room, vs) + ")");
}

}  // namespace keel::cluster
