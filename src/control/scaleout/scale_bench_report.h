// The pure part of the scale-out bench (scale_bench.h, `keel cluster bench-scale`): the paths a
// run measures, the summary of one scale-out from its bound TEs' replies, the fork's bandwidth
// over its yardsticks, and the report as text. The report's JSON is the bench's --json output
// (docs/benchmarks.md reads it); its text is the default output.
//
// Summary of one scale-out (times from the decision, on the steady clock every process shares):
//   {"mode", "tes", "failed", "from_store", "errors"?: [status of each failed bind],
//    "fork_errors"?: [why a TE loaded the file instead], and with at least one TE bound
//    "time_to_all_ready_s" (the last announce), "decision_to_first_token_s": {"min", "median",
//    "max"}, "phase_median_s": {phase: s}; fork only: "forked", "fork_seconds" (per TE, chain
//    order) and with one fork "fork_bytes", "fork_gbps_first" (TE 0's hop), "fork_gbps_chain"
//    (the whole chain as one rate)}
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/scaleout/warm_pool.h"
#include "core/result.h"

namespace keel::control {

// The paths of "cold,store,fork" (comma-separated, in order); InvalidArgument naming an item
// that is none of them.
Result<std::vector<std::string>> parse_scale_modes(const std::string& modes);

// The upper median (v[n/2] of the sorted values); 0 for none.
[[nodiscard]] double median_of(std::vector<double> v);

// The summary of one scale-out of `mode` decided at `decision_ns` (see above).
[[nodiscard]] cluster::Json summarize_scale_out(const std::string& mode, int64_t decision_ns,
                                                const std::vector<Result<BoundTe>>& tes);

// The fork's bandwidth over a yardstick's ({"gbps"}; nothing when it has none, i.e. failed, or
// the summary has no fork rate): `<prefix>_first` for the first hop and, with `chain`,
// `<prefix>_chain` for the whole chain.
void add_fork_ratio(const cluster::Json& yardstick, const std::string& prefix, bool chain,
                    cluster::Json* summary);

// The report ({"model", "tes", "threads_per_te", "isa", "runs": [summary...], ...}) as the text
// `keel cluster bench-scale` prints: a header line, then per run its times, phases and, for a
// fork, its rates against the yardsticks.
[[nodiscard]] std::string scale_bench_text(const cluster::Json& report);

}  // namespace keel::control
