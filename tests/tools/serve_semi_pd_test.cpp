// `keel serve --mode semi-pd` end to end: streamed greedy text equals the colocated server's and
// its own non-streamed text; a client that disconnects mid-decode cancels its request and frees
// its blocks; /metrics shows the split gauges and the switch histogram. Built-in stories260K in a
// scratch KEEL_HOME (no shared data needed).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

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

}  // namespace
}  // namespace keel::testing
