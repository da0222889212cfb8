// profile_by_output_length: ITLs land in the bucket of the token they precede, pooled over
// requests; KV samples are averaged over the time a bucket's tokens were produced; failed
// requests are left out. parse_prometheus_gauge: labels, longer names, comments, absence.
// End to end: bench-serve's long-decode workload polls the fake server's /metrics.
#include "loadgen/length_profile.h"

#include <gtest/gtest.h>

#include "fake_openai_server.h"
#include "loadgen/bench_serve.h"

namespace keel::loadgen {
namespace {

RequestRecord record(double start, double ttft, std::vector<double> itl) {
  RequestRecord r;
  r.success = true;
  r.start_s = start;
  r.ttft_s = ttft;
  r.itl_s = std::move(itl);
  r.num_content_chunks = static_cast<int64_t>(r.itl_s.size()) + 1;
  return r;
}

TEST(LengthProfileTest, ItlAndKvUsageByBucket) {
  // Tokens at t = 1.0, 1.1, 1.2 | 1.4, 1.6, 1.8 | 2.1 (buckets of 3 tokens).
  std::vector<RequestRecord> recs = {record(0.5, 0.5, {0.1, 0.1, 0.2, 0.2, 0.2, 0.3})};
  RequestRecord failed = record(0.0, 0.1, {9.0, 9.0});
  failed.success = false;
  recs.push_back(failed);
  const std::vector<GaugeSample> kv = {{0.9, 1.0}, {1.05, 0.1}, {1.15, 0.3}, {1.5, 0.5},
                                       {1.7, 0.7}, {2.1, 0.9},  {3.0, 5.0}};
  const std::vector<LengthBucket> b = profile_by_output_length(recs, 3, kv);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].first_token, 0);
  EXPECT_EQ(b[0].end_token, 3);
  EXPECT_EQ(b[0].itl_count, 2);  // tokens 1 and 2
  EXPECT_NEAR(b[0].mean_itl_ms, 100.0, 1e-9);
  EXPECT_EQ(b[1].itl_count, 3);  // tokens 3, 4, 5
  EXPECT_NEAR(b[1].mean_itl_ms, 200.0, 1e-9);
  EXPECT_EQ(b[2].itl_count, 1);
  EXPECT_NEAR(b[2].mean_itl_ms, 300.0, 1e-9);
  ASSERT_TRUE(b[0].kv_usage.has_value());
  EXPECT_NEAR(*b[0].kv_usage, 0.2, 1e-9);  // samples in [1.0, 1.2]
  EXPECT_NEAR(*b[1].kv_usage, 0.6, 1e-9);  // [1.4, 1.8]
  EXPECT_NEAR(*b[2].kv_usage, 0.9, 1e-9);  // [2.1, 2.1]
  EXPECT_TRUE(profile_by_output_length(recs, 0, kv).empty());
  EXPECT_FALSE(profile_by_output_length(recs, 3, {})[0].kv_usage.has_value());
}

TEST(LengthProfileTest, ParsesAGaugeFromPrometheusText) {
  const std::string text =
      "# HELP keel:kv_cache_usage_perc x\n# TYPE keel:kv_cache_usage_perc gauge\n"
      "keel:kv_cache_usage_perc_other 7\n"
      "keel:kv_cache_usage_perc{model_name=\"m\"} 0.125\n";
  EXPECT_EQ(parse_prometheus_gauge(text, "keel:kv_cache_usage_perc"), 0.125);
  EXPECT_EQ(parse_prometheus_gauge(text, "keel:kv_cache_usage_perc_other"), 7.0);
  EXPECT_EQ(parse_prometheus_gauge("plain 3\n", "plain"), 3.0);
  EXPECT_FALSE(parse_prometheus_gauge(text, "keel:missing").has_value());
  EXPECT_FALSE(parse_prometheus_gauge("plain x\n", "plain").has_value());
}

TEST(LengthProfileTest, LongDecodeWorkloadPollsTheServersKvUsage) {
  testing::FakeOpenAiServer server({.num_chunks = 40, .chunk_delay_ms = 10});
  BenchServeConfig c;
  c.base_url = server.base_url();
  c.workload.dataset = DatasetKind::kLongDecode;
  c.workload.num_prompts = 2;
  c.workload.input_len = 8;
  c.workload.output_len = 40;
  c.workload.vocab_size = 500;
  c.load.max_concurrency = 1;
  c.length_bucket = 10;
  c.kv_poll_s = 0.02;
  auto r = run_bench_serve(c);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_EQ(r->by_output_length.size(), 4u);
  for (const LengthBucket& b : r->by_output_length) {
    EXPECT_GT(b.itl_count, 0);
    EXPECT_GT(b.mean_itl_ms, 5.0);  // the fake server's 10 ms gaps
    ASSERT_TRUE(b.kv_usage.has_value()) << b.first_token;
    EXPECT_DOUBLE_EQ(*b.kv_usage, 0.42);
  }
  EXPECT_EQ(dataset_kind_name(DatasetKind::kLongDecode), "long-decode");
}

}  // namespace
}  // namespace keel::loadgen
