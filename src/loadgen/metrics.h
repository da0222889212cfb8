// Benchmark metrics over RequestRecords, defined exactly as `vllm bench serve` computes them:
//   output tokens of a request  usage.completion_tokens; when the server sent none, the number of
//                               content chunks (counted in num_output_from_chunks)
//   TPOT                        (E2E − TTFT) / (output tokens − 1), only for output tokens > 1
//                               (for goodput a request with ≤ 1 output token has TPOT 0)
//   ITL                         every inter-chunk gap of every completed request, pooled
//   throughputs                 totals over completed requests / benchmark duration
//   goodput                     completed requests meeting every given SLO (≤), per second
//   statistics                  mean, median, population std, percentiles with linear
//                               interpolation (numpy's default); all 0 for an empty set
// Input tokens use usage.prompt_tokens when the server reported it, else the generated length.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "loadgen/request_record.h"

namespace keel::loadgen {

// Service-level objectives for goodput, in milliseconds; an absent one is not checked.
struct GoodputSlo {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2el_ms;
  [[nodiscard]] bool any() const { return ttft_ms || tpot_ms || e2el_ms; }
};

// Summary of one latency metric, in milliseconds.
struct LatencyStats {
  int64_t count = 0;  // samples behind the figures
  double mean_ms = 0.0;
  double median_ms = 0.0;
  double std_ms = 0.0;
  std::vector<std::pair<double, double>> percentiles_ms;  // (p in [0, 100], value)
};

struct BenchmarkMetrics {
  double duration_s = 0.0;                // first send to last completion
  int64_t completed = 0;                  // successful requests
  int64_t failed = 0;                     // failed requests
  int64_t cancelled = 0;                  // requests the client hung up on (--disconnect-prob)
  int64_t total_input_tokens = 0;         // over completed requests
  int64_t total_output_tokens = 0;        // over completed requests
  int64_t num_output_from_chunks = 0;     // completed requests without usage (chunks were counted)
  int64_t num_input_from_usage = 0;       // completed requests whose input count came from usage
  double request_throughput = 0.0;        // completed / s
  std::optional<double> request_goodput;  // good / s; set when an SLO was given
  double output_throughput = 0.0;         // output tokens / s
  double total_token_throughput = 0.0;    // (input + output tokens) / s
  double max_output_tokens_per_s = 0.0;   // busiest one-second bucket of token arrivals
  int64_t max_concurrent_requests = 0;    // peak overlap of [start, start + E2E) intervals
  LatencyStats ttft, tpot, itl, e2el;
  std::vector<std::string> first_errors;  // up to kMaxErrors failure reasons, in request order
};

inline constexpr size_t kMaxErrors = 10;

// The p-th percentile (0..100) of sorted values, linear interpolation; 0 for an empty vector.
double percentile_sorted(const std::vector<double>& sorted, double p);

// Mean, median, population std and the given percentiles of values (seconds), in ms.
LatencyStats summarize_ms(std::vector<double> values_s, const std::vector<double>& percentiles);

// Output tokens of a completed request under the rule above.
int64_t output_tokens_of(const RequestRecord& r);

// All metrics of a run lasting duration_s (> 0).
BenchmarkMetrics compute_metrics(const std::vector<RequestRecord>& records, double duration_s,
                                 const std::vector<double>& percentiles, const GoodputSlo& slo);

}  // namespace keel::loadgen
