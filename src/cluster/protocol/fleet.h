// The fleet as a job executor sees it: plain snapshots of task executors (TEs) — role, model,
// address, load, health — that the router and, later, the autoscaler read as pure inputs. The JE
// builds one from the TEs' load reports; tests build them by hand.
//
// Load (what "least load" compares): a TE's outstanding work in tokens — prompt tokens not yet
// prefilled plus, for each running request, the tokens it may still generate — and its KV use.
// Invariants: ids are unique within a snapshot; kv_blocks_used <= kv_blocks_total.
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/health/te_health.h"

namespace keel::cluster {

// What a TE computes. kColocated runs whole requests (prefill and decode); kPrefill only
// prefills and hands its KV to a decode TE; kDecode continues from transferred KV.
enum class TeRole { kColocated, kPrefill, kDecode };
[[nodiscard]] std::string_view te_role_name(TeRole role);  // "colocated", "prefill", "decode"
[[nodiscard]] std::optional<TeRole> parse_te_role(std::string_view name);

struct TeLoad {
  int32_t num_waiting = 0;      // requests queued, not yet admitted
  int32_t num_running = 0;      // requests admitted (prefilling or decoding)
  int64_t pending_tokens = 0;   // prompt tokens to prefill + tokens still to generate (bounded by
                                // max_tokens) over its waiting and running requests
  int64_t kv_blocks_used = 0;   // KV pool blocks referenced
  int64_t kv_blocks_total = 0;  // KV pool size
  friend bool operator==(const TeLoad&, const TeLoad&) = default;
};

struct TeInfo {
  std::string id;       // unique in the fleet, e.g. "te-0"
  std::string address;  // control endpoint "host:port"
  TeRole role = TeRole::kColocated;
  std::string model;  // served model name; TEs of one model and role form a group
  int64_t pid = 0;    // its process id on its host (for operators and fault-injection tests)
  TeLoad load;
  bool healthy = true;  // false once the JE counts it dead (gone, or no progress for too long)
  health::TeState state = health::TeState::kHealthy;  // from progress (te_health.h)
  // A colocated TE whose engine is semi-PD (`keel te --role colocated --mode semi-pd`): a prefill
  // and a decode worker over one KV pool. It runs whole requests, so the router treats it as any
  // colocated TE (its load: both workers' queues and its KV use); the flag is for status only.
  bool semi_pd = false;
  // Pipeline stages (`keel te --pp 2`: this process and its `keel pp-stage`); 1 = every layer
  // here. Status only: the router treats a pipelined TE as any colocated TE.
  int32_t pp_stages = 1;
  friend bool operator==(const TeInfo&, const TeInfo&) = default;
};

struct FleetSnapshot {
  std::vector<TeInfo> tes;
  [[nodiscard]] const TeInfo* find(std::string_view id) const;
};

// The TEs a JE lists in its fleet, as indices into `tes` in order: all but those whose address
// is in `forgotten` (remove_te with forget: a TE replaced, or drained and stopped — it leaves the
// list instead of staying in it marked hung or dead).
[[nodiscard]] std::vector<size_t> listed_tes(const std::vector<TeInfo>& tes,
                                             const std::vector<std::string>& forgotten);

}  // namespace keel::cluster
