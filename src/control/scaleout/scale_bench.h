// The scale-out bench behind `keel cluster bench-scale`: measures scale-outs of N task executors
// on this machine — time from the decision to N ready TEs and from the decision to a TE's first
// token — for each path:
//   cold   a new `keel te` process per TE, started at the decision, reading the GGUF after
//          posix_fadvise(POSIX_FADV_DONTNEED) dropped it from the page cache
//   store  warm-pool TEs (started before, no model) bound at the decision, mapping the model's
//          entry from the model store (built before the decision by a preload)
//   fork   warm-pool TEs each with its own empty store directory (a host without the entry),
//          bound at the decision to fork the entry from a running TE (bound from the store
//          before the decision) by chain relay — TE 0 from the source, TE i from TE i-1 while
//          it receives — then map it. Reported with the fork's bandwidth against two probes, the
//          source pushing as many bytes to this process over the same transfer service, which
//          drops them: "probe" one cached chunk of zeros again and again (the transport alone),
//          "probe_entry" the entry's own bytes from the source's mapping (what a fork moves,
//          without the target's writes) — and against this host's rate of writing as many bytes
//          into fresh shared memory ("fresh_pages": a new file in the store directory, mapped and
//          written chunk by chunk, as a fork's target fills its entry). With `source_netns` the
//          source runs in another network namespace at `source_host` (another host as far as the
//          network goes): bench/fork_hosts.sh.
// A TE's "first token" is its warm-up token (bind_model.h's post-load phase), generated on the
// bound engine before it announces itself; the decision is taken in this process. Both use the
// steady clock, which every process of a host shares. The summaries are scale_bench_report.h's.
//
// Thread safety: runs on the caller's thread; blocks until every TE it started is stopped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/protocol/messages.h"
#include "core/result.h"

namespace keel::control {

struct ScaleBenchConfig {
  std::string model_path;                      // the GGUF file (the caller resolves names)
  int32_t tes = 1;                             // TEs per scale-out
  int32_t threads_per_te = 1;                  // each TE's compute threads
  int64_t ctx_size = 512;                      // each TE's max model length (keeps the KV small)
  int64_t kv_cache_bytes = int64_t{64} << 20;  // each TE's KV cache
  std::string store_dir = "/dev/shm";          // the model store (a tmpfs)
  std::string modes = "cold,store";            // comma-separated: cold | store | fork
  std::string isa;                             // "" = this CPU's best (KEEL_ISA)
  std::string event_log;                       // JSON lines appended, one per bound TE; "" = none
  bool keep_entry = false;  // leave the store entry the bench built (else removed at the end)
  double start_timeout_s = 120.0;  // seconds a warm TE may take to start
  bool verbose = false;            // forward the TEs' output
  // Where the TEs listen and this process receives the probe; the fork's source may run in
  // another network namespace (`ip netns exec`) at its own address — another host.
  std::string host = "127.0.0.1";
  std::string source_netns;  // "" = this namespace
  std::string source_host;   // "" = host
};

// Runs every mode in order and returns the report: {"model", "model_bytes", "tes",
// "threads_per_te", "isa", "preload"? (the store entry built for store/fork: "entry", "bytes",
// "seconds", "already_present"), "runs": [one summary per mode, scale_bench_report.h]} — plus, for
// a fork, "probe", "probe_entry", "fresh_pages" ({"bytes", "seconds", "gbps"} or {"error"}) and
// the fork's ratios to them ("fork_vs_probe_first"/"_chain", "fork_vs_entry_probe_first"/"_chain",
// "fork_vs_fresh_pages_first"). `keel_command` is the program the TEs run (`<keel_command> te
// ...`). A TE that fails to bind is counted in its run's summary; a mode that cannot start its
// warm pool, a bad mode name or an unusable store fails the call.
Result<cluster::Json> run_scale_bench(const ScaleBenchConfig& config,
                                      const std::vector<std::string>& keel_command);

}  // namespace keel::control
