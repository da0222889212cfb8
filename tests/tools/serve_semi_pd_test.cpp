// `keel serve --mode semi-pd` end to end: streamed greedy text equals the colocated server's and
// its own non-streamed text; a client that disconnects mid-decode cancels its request and frees
// its blocks; /metrics shows the split gauges and the switch histogram. --semi-pd-dynamic with an
// impossible TTFT SLO grows the prefill side (the controller's decisions in /metrics) while the
// greedy text stays the colocated server's; bad controller flags are one-line errors. Built-in
// stories260K in a scratch KEEL_HOME (no shared data needed).
#include <gtest/gtest.h>
#include <sched.h>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;

std::vector<std::string> semi_pd_env() {
  static const std::string home = make_temp_dir("serve-semi-pd-home");
  return {"KEEL_HOME=" + home};
}

std::string complete(int port, const std::string& prompt, bool stream) {
  const json body = {{"prompt", prompt},
                     {"max_tokens", 24},
                     {"temperature", 0},
                     {"ignore_eos", true},
                     {"stream", stream}};
  const HttpResponse r = http_request(port, "POST", "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  if (!stream) return json::parse(r.body)["choices"][0]["text"].get<std::string>();
  bool error = false;
  std::string text = completion_stream_text(r.body, &error);
  EXPECT_FALSE(error) << r.body;
  return text;
}

TEST(ServeSemiPdTest, StreamsColocatedTextCancelsAndExportsTheSplit) {
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Lily saw a"};
  std::vector<std::string> colocated;
  {
    ServeProcess c({"-t", "1"}, semi_pd_env());
    ASSERT_TRUE(c.ok()) << c.error();
    for (const auto& p : prompts) colocated.push_back(complete(c.port(), p, false));
  }
  ServeProcess s({"--mode", "semi-pd", "--semi-pd-split", "1,1"}, semi_pd_env());
  ASSERT_TRUE(s.ok()) << s.error();
  const int port = s.port();
  ASSERT_TRUE(eventually([&] { return http_request(port, "GET", "/health").status == 200; }));
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(complete(port, prompts[i], true), colocated[i]) << prompts[i];
    EXPECT_EQ(complete(port, prompts[i], false), colocated[i]) << prompts[i];
  }

  // A long streamed generation (stories260K's context is 512), dropped after its first token:
  // cancelled, blocks freed.
  HttpConnection decoding(port);
  ASSERT_TRUE(decoding.send_post(
      "/v1/completions",
      json{{"prompt", "hello"}, {"max_tokens", 480}, {"ignore_eos", true}, {"stream", true}}
          .dump()));
  const std::string first = decoding.read_until(
      [](const std::string& r) { return r.find("\"text\"") != std::string::npos; }, 20000);
  ASSERT_NE(first.find("\"text\""), std::string::npos) << first;
  decoding.close();
  const auto metrics = [&] { return http_request(port, "GET", "/metrics").body; };
  ASSERT_TRUE(eventually([&] {
    const std::string m = metrics();
    return metric_value(m, "keel:num_requests_running") == 0 &&
           metric_value(m, "keel:kv_cache_usage_perc") == 0.0;
  })) << "the dropped request was not cancelled or its blocks not freed";
  const std::string m = metrics();
  EXPECT_GE(metric_value(m, "keel:request_success_total", "finished_reason=\"abort\""), 1.0);
  EXPECT_EQ(metric_value(m, "keel:semi_pd_split_prefill_cores"), 1.0);
  EXPECT_EQ(metric_value(m, "keel:semi_pd_split_decode_cores"), 1.0);
  EXPECT_EQ(metric_value(m, "keel:semi_pd_switch_seconds_count"), 0.0);  // no re-split yet
  EXPECT_EQ(s.terminate_and_wait(20000), 0);
}

int allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
}

TEST(ServeSemiPdTest, DynamicControllerGrowsPrefillOnMissedTtft) {
  if (allowed_cpus() < 2) GTEST_SKIP() << "needs 2 cores for a prefill side of 2";
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog"};
  std::vector<std::string> colocated;
  {
    ServeProcess c({"-t", "1"}, semi_pd_env());
    ASSERT_TRUE(c.ok()) << c.error();
    for (const auto& p : prompts) colocated.push_back(complete(c.port(), p, false));
  }
  // TTFT SLO 1 µs: every window with a first token misses it. x + y ≤ 4 lets x grow past 1,1
  // without a donor (the sets overlap).
  ServeProcess s({"--mode", "semi-pd", "--semi-pd-split", "1,1", "--semi-pd-dynamic",
                  "--semi-pd-ttft-slo-ms", "0.001", "--semi-pd-tpot-slo-ms", "60000",
                  "--semi-pd-window-ms", "50", "--semi-pd-max-cores", "4"},
                 semi_pd_env());
  ASSERT_TRUE(s.ok()) << s.error();
  const int port = s.port();
  ASSERT_TRUE(eventually([&] { return http_request(port, "GET", "/health").status == 200; }));
  const auto metrics = [&] { return http_request(port, "GET", "/metrics").body; };
  size_t i = 0;
  ASSERT_TRUE(eventually(
      [&] {
        const size_t k = i++ % prompts.size();
        EXPECT_EQ(complete(port, prompts[k], i % 2 == 0), colocated[k]) << prompts[k];
        return metric_value(metrics(), "keel:semi_pd_split_prefill_cores") == 2.0;
      },
      std::chrono::seconds(10)))
      << metrics();
  const std::string m = metrics();
  EXPECT_GE(metric_value(m, "keel:semi_pd_decisions_total", "reason=\"probe_prefill\""), 1.0) << m;
  EXPECT_EQ(metric_value(m, "keel:semi_pd_split_decode_cores"), 1.0);
  for (size_t k = 0; k < prompts.size(); ++k) {  // after the re-split
    EXPECT_EQ(complete(port, prompts[k], true), colocated[k]) << prompts[k];
  }
  EXPECT_EQ(s.terminate_and_wait(20000), 0);
}

TEST(ServeSemiPdTest, BadControllerFlagsAreOneLineErrors) {
  const std::vector<std::vector<std::string>> bad = {
      {"--semi-pd-dynamic"},  // colocated mode
      {"--mode", "semi-pd", "--semi-pd-dynamic", "--semi-pd-ttft-slo-ms", "0"},
      {"--mode", "semi-pd", "--semi-pd-dynamic", "--semi-pd-percentile", "101"},
      {"--mode", "semi-pd", "--semi-pd-dynamic", "--semi-pd-window-ms", "1"},
      {"--mode", "semi-pd", "--semi-pd-dynamic", "--semi-pd-max-cores", "65536"},
  };
  for (const auto& extra : bad) {
    std::vector<std::string> args = {"serve", "--port", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run_keel(args, semi_pd_env());
    EXPECT_NE(r.exit_code, 0) << extra.back();
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("semi-pd"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace keel::testing
