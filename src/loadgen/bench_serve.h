// `keel bench-serve` as a library call: validate the configuration, find the model (GET
// /v1/models when none is given), generate the workload, send one test request, run the load
// and compute the metrics. The CLI (tools/bench_serve_command.cpp) only parses flags into a
// BenchServeConfig and prints / saves the BenchServeResult.
//
//   BenchServeConfig ──validate──▶ model id ──▶ prompts (workload.h) ──▶ bodies (endpoint.h)
//     ──▶ test request ──▶ run_load (load_runner.h) ──▶ compute_metrics (metrics.h)
//
// Thread safety: run_bench_serve() blocks the calling thread; it shares nothing.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "loadgen/endpoint.h"
#include "loadgen/length_profile.h"
#include "loadgen/load_runner.h"
#include "loadgen/metrics.h"
#include "loadgen/workload.h"

namespace keel::loadgen {

struct BenchServeConfig {
  std::string base_url = "http://127.0.0.1:8080";  // http://host[:port][/prefix]
  std::string endpoint = "/v1/completions";        // or /v1/chat/completions
  std::string model;                               // "" = the first model of GET /v1/models
  std::string api_key;                             // "" = no Authorization header
  std::vector<std::pair<std::string, std::string>> headers;  // extra request headers
  double request_timeout_s = 600.0;  // a request making no progress this long fails
  WorkloadConfig workload;           // prompts; workload.seed is used as given
  LoadConfig load;                   // arrivals and concurrency; load.seed is used as given
  double temperature = 0.0;
  bool ignore_eos = true;
  nlohmann::json extra_body = nlohmann::json::object();  // merged into every request body
  std::vector<double> percentiles = {90.0, 99.0};        // reported besides mean/median/std
  GoodputSlo goodput;
  bool initial_test = true;  // send the first prompt alone first; abort if it fails
  bool keep_text = false;    // keep generated texts in the records
  // > 0: report per-token latency and the server's KV usage (keel:kv_cache_usage_perc, polled
  // every kv_poll_s during the main run) by output length, in buckets of this many tokens.
  int64_t length_bucket = 0;
  double kv_poll_s = 0.25;
  // Each request of the main run, with this probability (drawn from workload.seed), hangs up
  // after a uniformly drawn number of content chunks in [0, output_len): a client that goes
  // away. Such requests are counted as cancelled, not failed.
  double disconnect_prob = 0.0;

  // Ok, or invalid_argument naming the first bad field.
  [[nodiscard]] Status validate() const;
};

struct BenchServeResult {
  BenchServeConfig config;             // as run, with the model filled in
  std::string date;                    // local time at the start, YYYYMMDD-HHMMSS
  std::vector<RequestRecord> records;  // one per prompt, in workload order
  BenchmarkMetrics metrics;
  int64_t connections_opened = 0;
  std::vector<LengthBucket> by_output_length;  // with config.length_bucket > 0
};

// Progress notes for a human ("Starting main benchmark run..."); may be empty.
using NoteSink = std::function<void(const std::string&)>;

// Runs the benchmark. Fails on a bad configuration, an unreachable model list, or a failed test
// request; failures of individual requests of the main run are counted in the metrics instead.
Result<BenchServeResult> run_bench_serve(BenchServeConfig config, const NoteSink& note = {});

}  // namespace keel::loadgen
