// Per-token latency and server KV usage by output length (`keel bench-serve --workload
// long-decode`): how decode cost and memory grow as a generation gets longer — flat for a
// sparse policy with O(L) memory, growing for dense attention.
//   ITL of output token k (0-based, k ≥ 1)  the gap between content chunks k-1 and k; bucket
//                                            k / bucket_tokens; pooled over requests
//   KV usage of a bucket                     the mean of the server's keel:kv_cache_usage_perc
//                                            samples taken while some request was producing
//                                            that bucket's tokens (exact at concurrency 1,
//                                            where one request owns the whole KV cache)
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "loadgen/request_record.h"

namespace keel::loadgen {

// One reading of a server gauge, seconds from the start of the run.
struct GaugeSample {
  double t_s = 0.0;
  double value = 0.0;
};

struct LengthBucket {
  int64_t first_token = 0;  // output tokens [first_token, end_token)
  int64_t end_token = 0;
  int64_t itl_count = 0;  // ITL samples in the bucket
  double mean_itl_ms = 0.0;
  std::optional<double> kv_usage;  // mean gauge value while the bucket's tokens were produced
};

// Buckets of bucket_tokens output tokens up to the longest successful request (none when
// bucket_tokens < 1 or no request succeeded).
std::vector<LengthBucket> profile_by_output_length(std::span<const RequestRecord> records,
                                                   int64_t bucket_tokens,
                                                   std::span<const GaugeSample> kv_usage);

// The value of the first sample of `metric` (with or without labels) in a Prometheus text
// exposition; nullopt when absent or unparsable.
std::optional<double> parse_prometheus_gauge(std::string_view text, std::string_view metric);

}  // namespace keel::loadgen
