// Presentation of a BenchServeResult: the human table printed by `keel bench-serve` (laid out
// like vLLM's "Serving Benchmark Result") and the JSON saved by --save-result, whose field names
// follow vLLM's (completed, failed, total_input_tokens, request_throughput, mean_ttft_ms,
// p99_itl_ms, ...) with the run's configuration alongside.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "loadgen/bench_serve.h"

namespace keel::loadgen {

// Metric keys in report order: "ttft", "tpot", "itl", "e2el".
const std::vector<std::string>& all_metric_names();

// vLLM's name for percentile p in JSON keys: "99", "99.9".
std::string percentile_word(double p);

// The table; `metrics` selects which latency sections to print (subset of all_metric_names()).
std::string format_report(const BenchServeResult& result, const std::vector<std::string>& metrics);

// All figures and the configuration. detailed adds per-request arrays (input_lens, output_lens,
// ttfts, itls, latencies, start_times, errors, and generated_texts when they were kept).
nlohmann::json result_to_json(const BenchServeResult& result, bool detailed);

// Writes json (indented) to path; names the path on failure.
Status save_json(const nlohmann::json& json, const std::string& path);

}  // namespace keel::loadgen
