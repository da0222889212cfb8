// End-to-end tests of `keel bench-serve`: a full run against the loadgen fake OpenAI server (table
// on stdout, JSON result file), and one-line errors for bad flags, bad values and an unreachable
// server.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "loadgen/fake_openai_server.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

void expect_one_line_error(const CliResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.exit_code, 128) << "killed by a signal";
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Sanitizer"), std::string::npos) << r.err;
}

TEST(BenchServeCliTest, RunPrintsTheTableAndSavesJson) {
  FakeOpenAiServer server({.num_chunks = 3, .first_delay_ms = 5});
  const std::string out = make_temp_dir("bench-serve") + "/result.json";
  CliResult r =
      run_keel({"bench-serve", "--base-url", server.base_url(), "--num-prompts", "4", "--input-len",
                "8", "--output-len", "3", "--vocab-size", "100", "--max-concurrency", "2",
                "--goodput", "ttft:60000", "tpot:60000", "--save-result", out, "--save-detailed"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Serving Benchmark Result"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Successful requests:                     4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Request goodput (req/s):"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("Model: fake-model"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("4/4 requests done (0 failed)"), std::string::npos) << r.err;
  const auto j = nlohmann::json::parse(read_file(out));
  EXPECT_EQ(j["completed"], 4);
  EXPECT_EQ(j["failed"], 0);
  EXPECT_EQ(j["total_output_tokens"], 12);
  EXPECT_EQ(j["total_input_tokens"], 32);
  EXPECT_EQ(j["model_id"], "fake-model");
  EXPECT_EQ(j["max_concurrency"], 2);
  EXPECT_GT(j["request_goodput"].get<double>(), 0.0);
  EXPECT_EQ(j["ttfts"].size(), 4u);
  EXPECT_TRUE(j.contains("p99_ttft_ms"));
  EXPECT_EQ(server.posts_seen(), 5);  // the test request and four measured ones
}

TEST(BenchServeCliTest, BadFlagsAreOneLineErrors) {
  expect_one_line_error(run_keel({"bench-serve", "--bogus"}), "bogus");
  expect_one_line_error(run_keel({"bench-serve", "--num-prompts", "many"}), "num-prompts");
  expect_one_line_error(run_keel({"bench-serve", "--dataset-name", "sharegpt"}), "dataset-name");
  expect_one_line_error(run_keel({"bench-serve", "--request-rate", "fast"}), "request-rate");
  expect_one_line_error(run_keel({"bench-serve", "--range-ratio", "1.5"}), "range-ratio");
  expect_one_line_error(run_keel({"bench-serve", "--disconnect-prob", "1.5"}), "disconnect-prob");
  expect_one_line_error(run_keel({"bench-serve", "--goodput", "latency:5"}), "latency");
  expect_one_line_error(run_keel({"bench-serve", "--extra-body", "[1]"}), "extra-body");
  expect_one_line_error(run_keel({"bench-serve", "--base-url", "https://x"}), "https");
  expect_one_line_error(run_keel({"bench-serve", "--endpoint", "/v1/chat/completions",
                                  "--prompt-format", "token-ids"}),
                        "prompt-format");
  expect_one_line_error(run_keel({"bench-serve", "--percentile-metrics", "ttft,foo"}), "foo");
}

TEST(BenchServeCliTest, UnreachableServerIsOneLineError) {
  uint16_t port = 0;
  {
    FakeOpenAiServer gone({});
    port = gone.port();
  }
  CliResult r = run_keel({"bench-serve", "--base-url", "http://127.0.0.1:" + std::to_string(port),
                          "--num-prompts", "2"});
  expect_one_line_error(r, "cannot find a model");
  EXPECT_EQ(r.exit_code, 1);
}

}  // namespace
}  // namespace keel::testing
