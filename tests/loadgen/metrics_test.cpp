// Metric math on synthetic records: numpy-style percentiles, population std, vLLM's TPOT and
// output-token rules, goodput under SLOs, throughputs, peaks and error collection.
#include "loadgen/metrics.h"

#include <gtest/gtest.h>

#include <vector>

namespace keel::loadgen {
namespace {

// A completed request: sent at start, first chunk after ttft, then one chunk per itl gap.
RequestRecord ok_record(double start, double ttft, std::vector<double> itl,
                        std::optional<int64_t> usage_out, int64_t prompt_len = 10) {
  RequestRecord r;
  r.success = true;
  r.start_s = start;
  r.ttft_s = ttft;
  double end = ttft;
  for (double g : itl) end += g;
  r.latency_s = end;
  r.num_content_chunks = static_cast<int64_t>(itl.size()) + 1;
  r.itl_s = std::move(itl);
  r.usage_completion_tokens = usage_out;
  r.prompt_len = prompt_len;
  return r;
}

RequestRecord failed_record(const std::string& why) {
  RequestRecord r;
  r.error = why;
  return r;
}

TEST(MetricsTest, PercentilesInterpolateLinearlyLikeNumpy) {
  const std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 100), 4.0);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 90), 3.7);   // rank 2.7
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 99), 3.97);  // rank 2.97
  EXPECT_DOUBLE_EQ(percentile_sorted({5.0}, 99), 5.0);
  EXPECT_DOUBLE_EQ(percentile_sorted({}, 50), 0.0);
}

TEST(MetricsTest, SummaryInMillisecondsWithPopulationStd) {
  auto s = summarize_ms({0.004, 0.001, 0.003, 0.002}, {90, 99});
  EXPECT_EQ(s.count, 4);
  EXPECT_DOUBLE_EQ(s.mean_ms, 2.5);
  EXPECT_DOUBLE_EQ(s.median_ms, 2.5);
  EXPECT_NEAR(s.std_ms, 1.118033988749895, 1e-12);  // sqrt(1.25)
  ASSERT_EQ(s.percentiles_ms.size(), 2u);
  EXPECT_DOUBLE_EQ(s.percentiles_ms[0].first, 90);
  EXPECT_NEAR(s.percentiles_ms[0].second, 3.7, 1e-12);
  EXPECT_NEAR(s.percentiles_ms[1].second, 3.97, 1e-12);
  auto empty = summarize_ms({}, {99});
  EXPECT_EQ(empty.count, 0);
  EXPECT_EQ(empty.mean_ms, 0.0);
  EXPECT_EQ(empty.percentiles_ms[0].second, 0.0);
}

TEST(MetricsTest, TpotIsE2eMinusTtftOverOutputTokensMinusOne) {
  // Usage says 5 tokens though only 3 chunks arrived (tokens bundled): TPOT uses usage.
  std::vector<RequestRecord> recs = {ok_record(0.0, 0.1, {0.2, 0.2}, 5)};
  auto m = compute_metrics(recs, 1.0, {99}, {});
  EXPECT_EQ(m.total_output_tokens, 5);
  EXPECT_EQ(m.tpot.count, 1);
  EXPECT_NEAR(m.tpot.mean_ms, (0.5 - 0.1) / 4 * 1000, 1e-9);
  EXPECT_NEAR(m.ttft.mean_ms, 100, 1e-9);
  EXPECT_NEAR(m.e2el.mean_ms, 500, 1e-9);
  EXPECT_EQ(m.itl.count, 2);
  EXPECT_NEAR(m.itl.mean_ms, 200, 1e-9);
  EXPECT_EQ(m.num_output_from_chunks, 0);
}

TEST(MetricsTest, WithoutUsageOutputTokensAreCountedChunks) {
  std::vector<RequestRecord> recs = {ok_record(0.0, 0.1, {0.1, 0.1, 0.1}, std::nullopt),
                                     ok_record(0.0, 0.1, {0.1}, 0)};  // 0 counts as absent
  auto m = compute_metrics(recs, 2.0, {}, {});
  EXPECT_EQ(m.total_output_tokens, 4 + 2);
  EXPECT_EQ(m.num_output_from_chunks, 2);
  EXPECT_DOUBLE_EQ(m.output_throughput, 3.0);
}

TEST(MetricsTest, SingleTokenRequestsHaveNoTpotSample) {
  std::vector<RequestRecord> recs = {ok_record(0.0, 0.3, {}, 1), ok_record(0.0, 0.1, {0.1}, 2)};
  auto m = compute_metrics(recs, 1.0, {}, {});
  EXPECT_EQ(m.tpot.count, 1);
  EXPECT_NEAR(m.tpot.mean_ms, 100, 1e-9);
}

TEST(MetricsTest, ThroughputsCountCompletedRequestsOnly) {
  std::vector<RequestRecord> recs = {ok_record(0.0, 0.1, {0.1}, 2, 100),
                                     failed_record("HTTP 500: boom"),
                                     ok_record(0.5, 0.1, {0.1, 0.1}, 3, 50)};
  recs[2].usage_prompt_tokens = 52;  // the server's count wins over the generated length
  auto m = compute_metrics(recs, 4.0, {}, {});
  EXPECT_EQ(m.completed, 2);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input_tokens, 152);
  EXPECT_EQ(m.num_input_from_usage, 1);
  EXPECT_EQ(m.total_output_tokens, 5);
  EXPECT_DOUBLE_EQ(m.request_throughput, 0.5);
  EXPECT_DOUBLE_EQ(m.output_throughput, 1.25);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 157.0 / 4.0);
  EXPECT_FALSE(m.request_goodput.has_value());
  ASSERT_EQ(m.first_errors.size(), 1u);
  EXPECT_EQ(m.first_errors[0], "HTTP 500: boom");
}

TEST(MetricsTest, GoodputCountsRequestsMeetingEverySlo) {
  std::vector<RequestRecord> recs = {
      ok_record(0.0, 0.100, {0.020, 0.020}, 3),  // ttft 100 ms, tpot 20 ms: good
      ok_record(0.0, 0.300, {0.020, 0.020}, 3),  // ttft too slow
      ok_record(0.0, 0.100, {0.060, 0.060}, 3),  // tpot too slow
      ok_record(0.0, 0.200, {}, 1),              // single token: tpot 0, ttft exactly at SLO
      failed_record("x")};
  GoodputSlo slo{.ttft_ms = 200.0, .tpot_ms = 50.0};
  auto m = compute_metrics(recs, 2.0, {}, slo);
  ASSERT_TRUE(m.request_goodput.has_value());
  EXPECT_DOUBLE_EQ(*m.request_goodput, 2.0 / 2.0);
  GoodputSlo e2e{.e2el_ms = 150.0};
  auto m2 = compute_metrics(recs, 2.0, {}, e2e);
  EXPECT_DOUBLE_EQ(*m2.request_goodput, 1.0 / 2.0);  // only the first ends by 140 ms
}

TEST(MetricsTest, PeakTokensPerSecondAndConcurrency) {
  // Request A: tokens at 0.5, 0.9, 1.2; request B (starts 0.8): tokens at 1.0, 1.1, 1.3, 2.5.
  std::vector<RequestRecord> recs = {ok_record(0.0, 0.5, {0.4, 0.3}, 3),
                                     ok_record(0.8, 0.2, {0.1, 0.2, 1.2}, 4)};
  auto m = compute_metrics(recs, 3.0, {}, {});
  EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 4.0);  // second [1, 2): 1.2, 1.0, 1.1, 1.3
  EXPECT_EQ(m.max_concurrent_requests, 2);
  // Back-to-back requests (one ends exactly when the next starts) do not overlap.
  std::vector<RequestRecord> serial = {ok_record(0.0, 0.5, {0.5}, 2),
                                       ok_record(1.0, 0.5, {0.5}, 2)};
  EXPECT_EQ(compute_metrics(serial, 2.0, {}, {}).max_concurrent_requests, 1);
}

TEST(MetricsTest, AtMostTenErrorsAreKept) {
  std::vector<RequestRecord> recs;
  for (int i = 0; i < 25; ++i) recs.push_back(failed_record("e" + std::to_string(i)));
  auto m = compute_metrics(recs, 1.0, {99}, {});
  EXPECT_EQ(m.failed, 25);
  EXPECT_EQ(m.completed, 0);
  ASSERT_EQ(m.first_errors.size(), kMaxErrors);
  EXPECT_EQ(m.first_errors.front(), "e0");
  EXPECT_EQ(m.ttft.mean_ms, 0.0);
  EXPECT_EQ(m.max_concurrent_requests, 0);
}

}  // namespace
}  // namespace keel::loadgen
