// End to end: program-aware admission on `keel serve` (docs/agents.md) with the built-in model and
// one running sequence — while an agent program's long call runs, its next call and a new
// program's first call queue; the new program goes first under --program-scheduling plas (the
// default), the agent's call first under fcfs. A malformed X-Program-Id is a 400.
#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;

std::string program_completion(int max_tokens, bool stream) {
  return json{{"prompt", "Once upon a time"},
              {"max_tokens", max_tokens},
              {"ignore_eos", true},
              {"stream", stream}}
      .dump();
}

std::vector<std::string> programs_env() { return {"KEEL_HOME=" + make_temp_dir("serve-programs")}; }

double programs_waiting(int port) {
  return metric_value(http_request(port, "GET", "/metrics").body, "keel:num_requests_waiting");
}

// The programs in the order their queued calls finished.
std::vector<std::string> finish_order(const std::string& scheduling) {
  ServeProcess s({"-t", "1", "--max-num-seqs", "1", "--program-scheduling", scheduling},
                 programs_env());
  EXPECT_TRUE(s.ok()) << s.error();
  if (!s.ok()) return {};
  const int port = s.port();
  // The agent's first call: 400 output tokens (800 weighted: past the first level's 512).
  HttpConnection first(port);
  EXPECT_TRUE(first.send_post("/v1/completions", program_completion(400, true),
                              {{"X-Program-Id", "agent"}}));
  first.read_until([](const std::string& got) { return got.find("data:") != std::string::npos; },
                   30'000);
  std::mutex mu;
  std::vector<std::string> order;
  const auto call = [&](const std::string& program) {
    const HttpResponse r = http_request(port, "POST", "/v1/completions",
                                        program_completion(32, false), {{"X-Program-Id", program}});
    EXPECT_EQ(r.status, 200) << r.body;
    std::lock_guard lock(mu);
    order.push_back(program);
  };
  auto next = std::async(std::launch::async, call, "agent");
  EXPECT_TRUE(eventually([&] { return programs_waiting(port) >= 1; }));
  auto other = std::async(std::launch::async, call, "chat");
  EXPECT_TRUE(eventually([&] { return programs_waiting(port) >= 2; }));
  first.read_until([](const std::string& got) { return got.find("[DONE]") != std::string::npos; },
                   60'000);
  next.get();
  other.get();
  return order;
}

TEST(ServeProgramsTest, ANewProgramGoesBeforeALongProgramsNextCall) {
  EXPECT_EQ(finish_order("plas"), (std::vector<std::string>{"chat", "agent"}));
  EXPECT_EQ(finish_order("fcfs"), (std::vector<std::string>{"agent", "chat"}));
}

TEST(ServeProgramsTest, AMalformedProgramIdIsRefused) {
  ServeProcess s({"-t", "1"}, programs_env());
  ASSERT_TRUE(s.ok()) << s.error();
  const HttpResponse r =
      http_request(s.port(), "POST", "/v1/completions", program_completion(2, false),
                   {{"X-Program-Id", std::string(300, 'p')}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "X-Program-Id");
  const HttpResponse ok = http_request(s.port(), "POST", "/v1/completions",
                                       program_completion(2, false), {{"X-Program-Id", "agent-7"}});
  EXPECT_EQ(ok.status, 200) << ok.body;
}

}  // namespace
}  // namespace keel::testing
