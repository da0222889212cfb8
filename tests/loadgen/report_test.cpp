// The human table and the saved JSON: vLLM's field names and section titles, percentile keys,
// goodput shown only when asked for, per-request arrays only when detailed, and the file write.
#include "loadgen/report.h"

#include <gtest/gtest.h>

#include <fstream>

#include "support/test_support.h"

namespace keel::loadgen {
namespace {

BenchServeResult sample_result() {
  BenchServeResult r;
  r.config.model = "m";
  r.config.workload.num_prompts = 2;
  r.config.load.max_concurrency = 4;
  r.config.percentiles = {90, 99, 99.9};
  r.date = "20250101-000000";
  RequestRecord ok;
  ok.success = true;
  ok.ttft_s = 0.1;
  ok.itl_s = {0.02, 0.03};
  ok.latency_s = 0.15;
  ok.num_content_chunks = 3;
  ok.usage_completion_tokens = 3;
  ok.prompt_len = 8;
  RequestRecord bad;
  bad.index = 1;
  bad.error = "HTTP 500 Internal Server Error: boom";
  r.records = {ok, bad};
  r.metrics = compute_metrics(r.records, 2.0, r.config.percentiles, {});
  return r;
}

TEST(ReportTest, TableHasVllmLinesAndSelectedSections) {
  BenchServeResult r = sample_result();
  const std::string t = format_report(r, {"ttft", "itl"});
  for (const char* needle :
       {"============ Serving Benchmark Result ============", "Successful requests:",
        "Failed requests:", "Maximum request concurrency:", "Benchmark duration (s):",
        "Total generated tokens:", "Request throughput (req/s):",
        "Output token throughput (tok/s):", "---------------Time to First Token----------------",
        "Mean TTFT (ms):", "Median TTFT (ms):", "P90 TTFT (ms):", "P99.9 TTFT (ms):",
        "Mean ITL (ms):", "Error 0: HTTP 500 Internal Server Error: boom"}) {
    EXPECT_NE(t.find(needle), std::string::npos) << needle << "\n" << t;
  }
  EXPECT_EQ(t.find("TPOT"), std::string::npos);  // not selected
  EXPECT_EQ(t.find("goodput"), std::string::npos);
  EXPECT_NE(t.find("Mean TTFT (ms):                          100.00"), std::string::npos) << t;
}

TEST(ReportTest, JsonUsesVllmFieldNames) {
  BenchServeResult r = sample_result();
  auto j = result_to_json(r, /*detailed=*/false);
  EXPECT_EQ(j["completed"], 1);
  EXPECT_EQ(j["failed"], 1);
  EXPECT_EQ(j["total_input_tokens"], 8);
  EXPECT_EQ(j["total_output_tokens"], 3);
  EXPECT_DOUBLE_EQ(j["request_throughput"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["output_throughput"].get<double>(), 1.5);
  EXPECT_TRUE(j["request_goodput"].is_null());
  EXPECT_EQ(j["request_rate"], "inf");
  EXPECT_EQ(j["max_concurrency"], 4);
  EXPECT_EQ(j["model_id"], "m");
  EXPECT_EQ(j["backend"], "openai");
  EXPECT_NEAR(j["mean_ttft_ms"].get<double>(), 100.0, 1e-9);
  EXPECT_NEAR(j["mean_e2el_ms"].get<double>(), 150.0, 1e-9);
  EXPECT_NEAR(j["mean_tpot_ms"].get<double>(), 25.0, 1e-9);
  for (const char* key :
       {"median_ttft_ms", "std_ttft_ms", "p90_ttft_ms", "p99_ttft_ms", "p99.9_ttft_ms",
        "p99_tpot_ms", "median_itl_ms", "p99_itl_ms", "p99_e2el_ms", "duration",
        "total_token_throughput", "max_output_tokens_per_s", "max_concurrent_requests", "config"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["config"]["dataset_name"], "random");
  EXPECT_EQ(j["first_errors"][0], "HTTP 500 Internal Server Error: boom");
  EXPECT_FALSE(j.contains("ttfts"));
  auto d = result_to_json(r, /*detailed=*/true);
  ASSERT_TRUE(d.contains("ttfts"));
  EXPECT_EQ(d["ttfts"].size(), 2u);
  EXPECT_EQ(d["output_lens"], nlohmann::json({3, 0}));
  EXPECT_EQ(d["errors"][1], "HTTP 500 Internal Server Error: boom");
  EXPECT_EQ(d["itls"][0].size(), 2u);
}

TEST(ReportTest, GoodputAppearsWhenAnSloIsGiven) {
  BenchServeResult r = sample_result();
  r.config.goodput.ttft_ms = 50.0;
  r.metrics = compute_metrics(r.records, 2.0, r.config.percentiles, r.config.goodput);
  EXPECT_NE(format_report(r, all_metric_names()).find("Request goodput (req/s):"),
            std::string::npos);
  auto j = result_to_json(r, false);
  EXPECT_DOUBLE_EQ(j["request_goodput"].get<double>(), 0.0);  // TTFT 100 ms misses 50 ms
  EXPECT_EQ(j["config"]["goodput"]["ttft"], 50.0);
}

TEST(ReportTest, PercentileWords) {
  EXPECT_EQ(percentile_word(99), "99");
  EXPECT_EQ(percentile_word(99.9), "99.9");
  EXPECT_EQ(percentile_word(50), "50");
}

TEST(ReportTest, SavesJsonAndNamesAnUnwritablePath) {
  const std::string dir = keel::testing::make_temp_dir("loadgen-report");
  const std::string path = dir + "/result.json";
  ASSERT_TRUE(save_json(result_to_json(sample_result(), false), path).ok());
  auto parsed = nlohmann::json::parse(keel::testing::read_file(path));
  EXPECT_EQ(parsed["completed"], 1);
  Status st = save_json(nlohmann::json::object(), dir + "/missing/dir/x.json");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("missing/dir/x.json"), std::string::npos);
}

}  // namespace
}  // namespace keel::loadgen
