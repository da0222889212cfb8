// Server lifecycle and limits over real HTTP against the fake engine: shutdown after the engine's
// drain lets every stream finish (final chunk or error event, then [DONE]) before connections
// close; the connection cap closes the longest-idle connection first and refuses (503) when all
// are busy; the in-flight body budget refuses (503) a body that does not fit and frees its share
// when a request has been parsed.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "server_harness.h"
#include "support/test_support.h"

namespace keel::server::testing {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;
using Stall = FakeScript::Stall;

FakeScript stalled_stream() {
  FakeScript s;
  s.tokens = {kHello, kWorld, kBang};
  s.stall = Stall::kDecode;
  s.stall_after = 1;
  return s;
}

// Sends `n` streaming completions on their own connections and waits until the engine has them.
std::vector<std::unique_ptr<TestHttpClient>> start_streams(ServerHarness& h, size_t n) {
  std::vector<std::unique_ptr<TestHttpClient>> clients;
  const Json body = {{"prompt", "x"}, {"stream", true}, {"max_tokens", 3}};
  const size_t before = h.engine().submitted().size();
  for (size_t i = 0; i < n; ++i) {
    clients.push_back(std::make_unique<TestHttpClient>(h.port()));
    EXPECT_TRUE(clients.back()->send("POST", "/v1/completions", body.dump()));
  }
  EXPECT_TRUE(h.engine().wait_for_submits(before + n, 10s));
  return clients;
}

// The SSE payloads of each client's whole response; nullopt where the stream was cut.
std::vector<std::optional<std::vector<std::string>>> read_streams(
    std::vector<std::unique_ptr<TestHttpClient>>& clients) {
  std::vector<std::optional<std::vector<std::string>>> out;
  for (auto& c : clients) {
    std::optional<HttpResult> r = c->read_response();
    out.push_back(r && r->status == 200 ? std::optional(r->sse_data()) : std::nullopt);
  }
  return out;
}

TEST(ServerShutdownTest, StreamsEndWithAnErrorEventAndDoneWhenTheDrainTimesOut) {
  ServerHarness h;
  h.engine().set_script([](const engine::GenerationRequest&) { return stalled_stream(); });
  auto clients = start_streams(h, 6);
  h.server().stop_accepting();
  h.engine().drain(0ms);  // past the deadline at once: every request is aborted
  h.server().shutdown();  // right after, as `keel serve` does
  for (const auto& events : read_streams(clients)) {
    ASSERT_TRUE(events.has_value()) << "a stream was cut";
    ASSERT_GE(events->size(), 2u);
    EXPECT_EQ(events->back(), "[DONE]");
    const Json error = Json::parse((*events)[events->size() - 2]);
    EXPECT_TRUE(error.contains("error")) << error.dump();
  }
}

TEST(ServerShutdownTest, StreamsThatFinishDuringTheDrainAreDeliveredWhole) {
  ServerHarness h;
  h.engine().set_script([](const engine::GenerationRequest&) {
    FakeScript s;
    s.tokens = {kHello, kWorld, kBang};
    s.token_delay = 5ms;
    return s;
  });
  for (int round = 0; round < 3; ++round) {
    auto clients = start_streams(h, 6);
    if (round == 2) {
      h.server().stop_accepting();
      h.engine().drain(10s);  // returns once the last events are handed to the server
      h.server().shutdown();
    }
    for (const auto& events : read_streams(clients)) {
      ASSERT_TRUE(events.has_value()) << "a stream was cut in round " << round;
      ASSERT_GE(events->size(), 2u);
      EXPECT_EQ(events->back(), "[DONE]");
      const Json last = Json::parse((*events)[events->size() - 2]);
      EXPECT_EQ(last["choices"][0]["finish_reason"], "stop") << last.dump();
    }
  }
}

TEST(ServerLimitsTest, AtTheConnectionCapTheLongestIdleConnectionIsClosed) {
  ServerConfig config = test_config();
  config.max_connections = 3;
  ServerHarness h(config);
  std::vector<std::unique_ptr<TestHttpClient>> idle;
  for (size_t i = 0; i < 3; ++i) {  // three keep-alive connections, idle after one request each
    idle.push_back(std::make_unique<TestHttpClient>(h.port()));
    ASSERT_TRUE(idle.back()->send("GET", "/health"));
    ASSERT_EQ(idle.back()->read_response()->status, 200);
    // Idle in this order: the first is the longest idle.
    ASSERT_TRUE(
        keel::testing::eventually([&] { return h.server().num_idle_connections() == i + 1; }));
  }
  HttpResult fresh = http_request(h.port(), "GET", "/health");  // a fourth: served
  EXPECT_EQ(fresh.status, 200);
  EXPECT_TRUE(idle[0]->wait_closed(5000));       // the oldest idle one made room
  ASSERT_TRUE(idle[2]->send("GET", "/health"));  // the others still work
  EXPECT_EQ(idle[2]->read_response()->status, 200);
}

TEST(ServerLimitsTest, WhenEveryConnectionIsBusyANewOneGets503) {
  ServerConfig config = test_config();
  config.max_connections = 2;
  ServerHarness h(config);
  h.engine().set_script([](const engine::GenerationRequest&) { return stalled_stream(); });
  auto busy = start_streams(h, 2);
  HttpResult r = http_request(h.port(), "GET", "/health");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.json()["error"]["code"], "too_many_connections");
  EXPECT_EQ(r.header("retry-after"), "1");
  busy.clear();  // the clients go away: their requests are aborted, the slots free
  EXPECT_TRUE(keel::testing::eventually([&] { return h.server().num_connections() == 0; }));
  EXPECT_EQ(http_request(h.port(), "GET", "/health").status, 200);
}

// Headers of a POST whose body follows only after "100 Continue".
std::string expect_continue(size_t length) {
  return "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
         "Expect: 100-continue\r\nContent-Length: " +
         std::to_string(length) + "\r\n\r\n";
}

TEST(ServerLimitsTest, BodiesBeyondTheInFlightBudgetGet503) {
  ServerConfig config = test_config();
  config.max_body_bytes = 64 * 1024;
  config.max_inflight_body_bytes = 128 * 1024;
  ServerHarness h(config);
  const size_t len = 60 * 1024;
  // Two clients hold 60 KiB each (reserved before "100 Continue" is sent) ...
  TestHttpClient a(h.port()), b(h.port());
  for (TestHttpClient* c : {&a, &b}) {
    ASSERT_TRUE(c->send_raw(expect_continue(len)));
    std::optional<HttpResult> go = c->read_head();
    ASSERT_TRUE(go.has_value());
    EXPECT_EQ(go->status, 100);
  }
  // ... so a third does not fit: 503 before its body is read.
  TestHttpClient c(h.port());
  ASSERT_TRUE(c.send_raw(expect_continue(len)));
  std::optional<HttpResult> refused = c.read_response();
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 503) << refused->body;
  EXPECT_TRUE(c.wait_closed(5000));
  // Once a's request is parsed its share is free again.
  const std::string prompt = Json{{"prompt", std::string(len - 20, 'a')}}.dump();
  ASSERT_TRUE(a.send_raw(prompt + std::string(len - prompt.size(), ' ')));
  std::optional<HttpResult> done = a.read_response();
  ASSERT_TRUE(done.has_value());
  EXPECT_NE(done->status, 503);
  TestHttpClient d(h.port());
  ASSERT_TRUE(d.send_raw(expect_continue(len)));
  std::optional<HttpResult> go = d.read_head();
  ASSERT_TRUE(go.has_value());
  EXPECT_EQ(go->status, 100);
}

}  // namespace
}  // namespace keel::server::testing
