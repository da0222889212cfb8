// `keel serve --pp 2` end to end: the server starts its stage-1 process (`keel pp-stage`, its pid
// in the log), greedy completions — sequential and concurrent — equal `--pp 1`'s; a feature that
// needs every layer in one process is refused at start with a clear error; killing stage 1
// (SIGKILL) mid-stream ends that stream with an error and later requests fail fast — no hang.
// Built-in stories260K in a scratch KEEL_HOME (no shared data needed).
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "cli_runner.h"
#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;

std::vector<std::string> pp_env() {
  static const std::string home = make_temp_dir("serve-pp-home");
  return {"KEEL_HOME=" + home};
}

std::string complete(int port, const std::string& prompt) {
  const json body = {
      {"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true}};
  const HttpResponse r = http_request(port, "POST", "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return "<" + r.body + ">";
  return json::parse(r.body)["choices"][0]["text"].get<std::string>();
}

pid_t stage1_pid(const std::string& log) {
  std::smatch m;
  static const std::regex re("stage 1 layers \\[[0-9]+, [0-9]+\\) at [^ ]+ \\(pid ([0-9]+)\\)");
  return std::regex_search(log, m, re) ? static_cast<pid_t>(std::stoi(m[1])) : 0;
}

TEST(ServePpTest, TwoStagesServeTheSameGreedyTextAndFailCleanlyWhenStage1Dies) {
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Lily saw a",
                                            "Tom had a big"};
  std::vector<std::string> want;
  {
    ServeProcess one({"-t", "1"}, pp_env());
    ASSERT_TRUE(one.ok()) << one.error();
    ASSERT_TRUE(eventually([&] { return http_request(one.port(), "GET", "/health").status == 200; },
                           std::chrono::seconds(60)));
    for (const auto& p : prompts) want.push_back(complete(one.port(), p));
  }
  ServeProcess two({"-t", "1", "--pp", "2"}, pp_env());
  ASSERT_TRUE(two.ok()) << two.error();
  const int port = two.port();
  ASSERT_TRUE(eventually([&] { return http_request(port, "GET", "/health").status == 200; },
                         std::chrono::seconds(60)))
      << two.log();
  const pid_t pid = stage1_pid(two.log());
  ASSERT_GT(pid, 0) << two.log();
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(complete(port, prompts[i]), want[i]);
  std::vector<std::string> got(prompts.size());
  {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < prompts.size(); ++i) {
      threads.emplace_back([&, i] { got[i] = complete(port, prompts[i]); });
    }
    for (auto& t : threads) t.join();
  }
  EXPECT_EQ(got, want) << "concurrent requests through --pp 2";

  // A long stream, then stage 1 killed under it.
  HttpConnection stream(port);
  ASSERT_TRUE(stream.send_post(
      "/v1/completions",
      json{{"prompt", "hello"}, {"max_tokens", 480}, {"ignore_eos", true}, {"stream", true}}
          .dump()));
  const std::string first = stream.read_until(
      [](const std::string& r) { return r.find("\"text\"") != std::string::npos; }, 20000);
  ASSERT_NE(first.find("\"text\""), std::string::npos) << first;
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string rest = stream.read_until(
      [](const std::string& r) { return r.find("[DONE]") != std::string::npos; }, 30000);
  EXPECT_NE(rest.find("error"), std::string::npos)
      << rest.substr(rest.size() > 600 ? rest.size() - 600 : 0);
  const HttpResponse after =
      http_request(port, "POST", "/v1/completions",
                   json{{"prompt", "Once"}, {"max_tokens", 4}, {"temperature", 0}}.dump());
  EXPECT_NE(after.status, 200) << after.body;
  EXPECT_NE(after.body.find("pipeline stage"), std::string::npos) << after.body;
  // Generous bound (a loaded machine): the failure is prompt, not a step timeout (60 s).
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  EXPECT_EQ(two.terminate_and_wait(30000), 0) << two.log();
}

TEST(ServePpTest, FeaturesThatNeedEveryLayerAreRefusedAtStart) {
  CliResult r = run_keel({"serve", "-t", "1", "--pp", "2", "--speculative", "ngram", "--port", "0"},
                         pp_env());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("not supported with pipeline parallelism (--pp)"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace keel::testing
