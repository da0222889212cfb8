// Metric math; see the header for the definitions mirrored from vLLM.
#include "loadgen/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace keel::loadgen {
namespace {

// Peak of token arrivals per one-second bucket (from the earliest start) and peak overlap of
// request intervals, over completed requests.
void compute_peaks(const std::vector<RequestRecord>& records, BenchmarkMetrics* m) {
  double t0 = 0.0;
  double t1 = 0.0;
  bool any = false;
  for (const RequestRecord& r : records) {
    if (!r.success) continue;
    t0 = any ? std::min(t0, r.start_s) : r.start_s;
    t1 = any ? std::max(t1, r.start_s + r.latency_s) : r.start_s + r.latency_s;
    any = true;
  }
  if (!any) return;
  std::vector<int64_t> buckets(static_cast<size_t>(std::ceil(t1 - t0)) + 1, 0);
  std::vector<std::pair<double, int>> events;
  for (const RequestRecord& r : records) {
    if (!r.success) continue;
    for (double when : r.chunk_times_s()) {
      const auto b = static_cast<int64_t>(when - t0);
      if (b >= 0 && b < static_cast<int64_t>(buckets.size())) ++buckets[static_cast<size_t>(b)];
    }
    events.emplace_back(r.start_s, +1);
    events.emplace_back(r.start_s + r.latency_s, -1);
  }
  m->max_output_tokens_per_s =
      static_cast<double>(*std::max_element(buckets.begin(), buckets.end()));
  std::sort(events.begin(), events.end());  // at equal times, -1 (end) sorts before +1
  int64_t cur = 0;
  for (const auto& e : events) {
    cur += e.second;
    m->max_concurrent_requests = std::max(m->max_concurrent_requests, cur);
  }
}

bool meets(const std::optional<double>& slo_ms, double value_s) {
  return !slo_ms || value_s <= *slo_ms / 1000.0;
}

}  // namespace

double percentile_sorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0.0;
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

LatencyStats summarize_ms(std::vector<double> values_s, const std::vector<double>& percentiles) {
  LatencyStats s;
  s.count = static_cast<int64_t>(values_s.size());
  for (double p : percentiles) s.percentiles_ms.emplace_back(p, 0.0);
  if (values_s.empty()) return s;
  std::sort(values_s.begin(), values_s.end());
  const double n = static_cast<double>(values_s.size());
  const double mean = std::accumulate(values_s.begin(), values_s.end(), 0.0) / n;
  double var = 0.0;
  for (double v : values_s) var += (v - mean) * (v - mean);
  s.mean_ms = mean * 1000.0;
  s.std_ms = std::sqrt(var / n) * 1000.0;
  s.median_ms = percentile_sorted(values_s, 50.0) * 1000.0;
  for (auto& [p, v] : s.percentiles_ms) v = percentile_sorted(values_s, p) * 1000.0;
  return s;
}

int64_t output_tokens_of(const RequestRecord& r) {
  if (r.usage_completion_tokens && *r.usage_completion_tokens > 0)
    return *r.usage_completion_tokens;
  return r.num_content_chunks;
}

BenchmarkMetrics compute_metrics(const std::vector<RequestRecord>& records, double duration_s,
                                 const std::vector<double>& percentiles, const GoodputSlo& slo) {
  BenchmarkMetrics m;
  m.duration_s = duration_s;
  std::vector<double> ttfts, tpots, itls, e2els;
  int64_t good = 0;
  for (const RequestRecord& r : records) {
    if (r.cancelled) {
      ++m.cancelled;
      continue;
    }
    if (!r.success) {
      ++m.failed;
      if (m.first_errors.size() < kMaxErrors) m.first_errors.push_back(r.error);
      continue;
    }
    ++m.completed;
    const int64_t out = output_tokens_of(r);
    if (!(r.usage_completion_tokens && *r.usage_completion_tokens > 0)) ++m.num_output_from_chunks;
    m.total_output_tokens += out;
    if (r.usage_prompt_tokens) {
      m.total_input_tokens += *r.usage_prompt_tokens;
      ++m.num_input_from_usage;
    } else {
      m.total_input_tokens += r.prompt_len;
    }
    double tpot = 0.0;
    if (out > 1) {
      tpot = (r.latency_s - r.ttft_s) / static_cast<double>(out - 1);
      tpots.push_back(tpot);
    }
    ttfts.push_back(r.ttft_s);
    e2els.push_back(r.latency_s);
    itls.insert(itls.end(), r.itl_s.begin(), r.itl_s.end());
    if (meets(slo.ttft_ms, r.ttft_s) && meets(slo.tpot_ms, tpot) &&
        meets(slo.e2el_ms, r.latency_s)) {
      ++good;
    }
  }
  const double dur = duration_s > 0.0 ? duration_s : 1e-9;
  m.request_throughput = static_cast<double>(m.completed) / dur;
  if (slo.any()) m.request_goodput = static_cast<double>(good) / dur;
  m.output_throughput = static_cast<double>(m.total_output_tokens) / dur;
  m.total_token_throughput =
      static_cast<double>(m.total_input_tokens + m.total_output_tokens) / dur;
  m.ttft = summarize_ms(std::move(ttfts), percentiles);
  m.tpot = summarize_ms(std::move(tpots), percentiles);
  m.itl = summarize_ms(std::move(itls), percentiles);
  m.e2el = summarize_ms(std::move(e2els), percentiles);
  compute_peaks(records, &m);
  return m;
}

}  // namespace keel::loadgen
