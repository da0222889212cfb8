// Metrics: the engine's request-level histograms and counters, recorded on the engine thread and
// read as a plain MetricsSnapshot (types.h) from any thread. Lock-free: every field is atomic, so
// a snapshot may mix values of adjacent moments, which Prometheus tolerates. Only the engine (and
// test fakes) hold a Metrics; front ends see snapshots.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "engine/types.h"

namespace keel::engine {

class Histogram {
 public:
  // `bounds`: increasing upper bounds of the buckets (an implicit +Inf bucket follows).
  explicit Histogram(std::vector<double> bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void observe(double value);

  using Snapshot = HistogramSnapshot;
  [[nodiscard]] Snapshot snapshot() const;

 private:
  std::vector<double> bounds_;
  std::vector<std::atomic<uint64_t>> counts_;  // per bucket (not cumulative), +Inf last
  std::atomic<double> sum_{0.0};
  std::atomic<uint64_t> count_{0};
};

struct Metrics {
  Metrics();

  Histogram time_to_first_token_seconds;
  Histogram inter_token_latency_seconds;
  Histogram e2e_request_latency_seconds;
  Histogram request_queue_time_seconds;
  Histogram request_prompt_tokens;
  Histogram request_generation_tokens;
  Histogram early_exit_layers;  // layers executed per early-exit decode token
  // request_success_total{finished_reason}: indexed by FinishReason.
  std::array<std::atomic<int64_t>, 4> request_finished_total{};

  void count_finished(FinishReason reason) {
    request_finished_total[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  }
  [[nodiscard]] MetricsSnapshot snapshot() const;
};

}  // namespace keel::engine
