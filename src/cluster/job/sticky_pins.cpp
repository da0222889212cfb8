// StickyPins (see sticky_pins.h): two bounded tables with deadlines.
#include "cluster/job/sticky_pins.h"

#include <algorithm>

namespace keel::cluster {

template <typename Key>
void StickyPins::Table<Key>::put(const Key& key, const std::string& te_id, int64_t deadline,
                                 size_t max_entries) {
  erase(key);
  while (!entries.empty() && entries.size() >= max_entries) {
    erase(by_deadline.begin()->second);  // the earliest deadline gives way
  }
  entries.emplace(key, std::make_pair(te_id, deadline));
  by_deadline.emplace(deadline, key);
}

template <typename Key>
void StickyPins::Table<Key>::erase(const Key& key) {
  const auto it = entries.find(key);
  if (it == entries.end()) return;
  by_deadline.erase({it->second.second, key});
  entries.erase(it);
}

template <typename Key>
void StickyPins::Table<Key>::expire(int64_t now_ns) {
  while (!by_deadline.empty() && by_deadline.begin()->first <= now_ns) {
    entries.erase(by_deadline.begin()->second);
    by_deadline.erase(by_deadline.begin());
  }
}

StickyPins::StickyPins(int64_t ttl_ns, size_t max_entries)
    : ttl_ns_(std::max<int64_t>(ttl_ns, 1)), max_entries_(std::max<size_t>(max_entries, 1)) {}

void StickyPins::note(const std::string& tenant, const std::string& program, const JobRef& job,
                      const std::string& te_id, int64_t now_ns) {
  const int64_t deadline = now_ns + ttl_ns_;
  if (!program.empty()) programs_.put({tenant, program}, te_id, deadline, max_entries_);
  jobs_.put(job, te_id, deadline, max_entries_);
}

std::optional<std::string> StickyPins::te_for_program(const std::string& tenant,
                                                      const std::string& program,
                                                      int64_t now_ns) const {
  if (program.empty()) return std::nullopt;
  const auto it = programs_.entries.find({tenant, program});
  if (it == programs_.entries.end() || it->second.second <= now_ns) return std::nullopt;
  return it->second.first;
}

std::optional<std::string> StickyPins::take_job(const JobRef& job, int64_t now_ns) {
  const auto it = jobs_.entries.find(job);
  if (it == jobs_.entries.end()) return std::nullopt;
  std::optional<std::string> te;
  if (it->second.second > now_ns) te = it->second.first;
  jobs_.erase(job);
  return te;
}

void StickyPins::expire(int64_t now_ns) {
  programs_.expire(now_ns);
  jobs_.expire(now_ns);
}

}  // namespace keel::cluster
