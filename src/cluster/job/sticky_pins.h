// KV kept across tool calls in a cluster (docs/agent-kv.md, "In a cluster"): the job executor's
// memory of where pins are, as plain data on the caller's clock. A call that asks to keep its KV
// (GenerationRequest::keep_kv) leaves a pin on the TE that ran it; the JE notes that TE per
// (tenant, program) — so the program's next call is routed there first (router.h, RouteInput::
// sticky_te_id) — and per job, so the gateway's release (the turn did not end in a tool call)
// reaches that TE after the job itself is forgotten.
//
// Invariants: an entry lives until its deadline (noted at + ttl, pushed back when noted again; the
// TEs' pins live as long, --kv-pin-ttl); each table holds at most max_entries, the entry of the
// earliest deadline giving way first. Calls without a program are noted per job only. Tenants
// scope programs: two tenants' "agent-1" are two entries.
//
// Thread safety: none; the JE holds it under its mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "cluster/protocol/messages.h"

namespace keel::cluster {

class StickyPins {
 public:
  static constexpr size_t kDefaultMaxEntries = 65536;

  // ttl_ns: how long an entry lives after it was last noted (the TEs' pin TTL); > 0.
  explicit StickyPins(int64_t ttl_ns, size_t max_entries = kDefaultMaxEntries);

  // Job `job` of (tenant, program) that keeps its KV runs (or ran) on `te_id`, at now_ns.
  void note(const std::string& tenant, const std::string& program, const JobRef& job,
            const std::string& te_id, int64_t now_ns);
  // The TE of the program's last call that kept its KV, while its entry lives; nullopt for "".
  [[nodiscard]] std::optional<std::string> te_for_program(const std::string& tenant,
                                                          const std::string& program,
                                                          int64_t now_ns) const;
  // The TE holding job `job`'s pin, while its entry lives; the entry is forgotten (a release goes
  // out once).
  std::optional<std::string> take_job(const JobRef& job, int64_t now_ns);
  // Forgets the entries past their deadline.
  void expire(int64_t now_ns);

  [[nodiscard]] size_t num_programs() const { return programs_.size(); }
  [[nodiscard]] size_t num_jobs() const { return jobs_.size(); }

 private:
  // One table: key → (TE, deadline), with the keys ordered by deadline for expiry and the bound.
  template <typename Key>
  struct Table {
    std::map<Key, std::pair<std::string, int64_t>> entries;
    std::set<std::pair<int64_t, Key>> by_deadline;
    void put(const Key& key, const std::string& te_id, int64_t deadline, size_t max_entries);
    void erase(const Key& key);
    void expire(int64_t now_ns);
    [[nodiscard]] size_t size() const { return entries.size(); }
  };

  int64_t ttl_ns_;
  size_t max_entries_;
  Table<std::pair<std::string, std::string>> programs_;  // (tenant, program)
  Table<JobRef> jobs_;
};

}  // namespace keel::cluster
