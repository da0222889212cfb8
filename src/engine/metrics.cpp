// Histogram bucketing and the default bucket bounds (vLLM's, so dashboards carry over).
#include "engine/metrics.h"

#include <algorithm>

namespace keel::engine {
namespace {

std::vector<double> latency_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}

std::vector<double> token_buckets() {
  return {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000};
}

std::vector<double> layer_buckets() {
  std::vector<double> b;
  for (int l = 1; l <= 32; ++l) b.push_back(l);
  for (double l : {40.0, 48.0, 64.0, 80.0, 96.0, 128.0}) b.push_back(l);
  return b;
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}

void Histogram::observe(double value) {
  const size_t idx = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                                         bounds_.begin());
  counts_[idx].fetch_add(1, std::memory_order_relaxed);
  double cur = sum_.load(std::memory_order_relaxed);
  while (!sum_.compare_exchange_weak(cur, cur + value, std::memory_order_relaxed)) {
  }
  count_.fetch_add(1, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.bounds = bounds_;
  s.cumulative.resize(counts_.size());
  uint64_t running = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = running;
  }
  s.sum = sum_.load(std::memory_order_relaxed);
  s.count = running;
  return s;
}

Metrics::Metrics()
    : time_to_first_token_seconds(latency_buckets()),
      inter_token_latency_seconds(latency_buckets()),
      e2e_request_latency_seconds(latency_buckets()),
      request_queue_time_seconds(latency_buckets()),
      request_prompt_tokens(token_buckets()),
      request_generation_tokens(token_buckets()),
      early_exit_layers(layer_buckets()) {}

MetricsSnapshot Metrics::snapshot() const {
  MetricsSnapshot s;
  s.time_to_first_token_seconds = time_to_first_token_seconds.snapshot();
  s.inter_token_latency_seconds = inter_token_latency_seconds.snapshot();
  s.e2e_request_latency_seconds = e2e_request_latency_seconds.snapshot();
  s.request_queue_time_seconds = request_queue_time_seconds.snapshot();
  s.request_prompt_tokens = request_prompt_tokens.snapshot();
  s.request_generation_tokens = request_generation_tokens.snapshot();
  s.early_exit_layers = early_exit_layers.snapshot();
  for (size_t i = 0; i < s.request_finished_total.size(); ++i) {
    s.request_finished_total[i] = request_finished_total[i].load(std::memory_order_relaxed);
  }
  return s;
}

std::string_view work_class_name(WorkClass c) {
  switch (c) {
    case WorkClass::kInteractive:
      return "interactive";
    case WorkClass::kBatch:
      return "batch";
    case WorkClass::kTraining:
      return "training";
  }
  return "interactive";
}

std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kError:
      return "error";
  }
  return "unknown";
}

}  // namespace keel::engine
