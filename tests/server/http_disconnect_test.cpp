// Client disconnects cancel the request wherever it is — queued, "prefilling" (admitted, no
// token yet) or decoding — for streamed and non-streamed requests, by FIN or by RST: the fake
// engine must see abort(key) within a bounded wait. Also: shutdown() with a request in flight.
#include <gtest/gtest.h>

#include <thread>

#include "server_harness.h"
#include "support/test_support.h"

namespace keel::server::testing {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;
using Stall = FakeScript::Stall;

struct Case {
  Stall stall;
  bool stream;
  bool reset;  // RST instead of FIN
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const char* stage = info.param.stall == Stall::kQueued    ? "Queued"
                      : info.param.stall == Stall::kPrefill ? "Prefill"
                                                            : "Decode";
  return std::string(stage) + (info.param.stream ? "Stream" : "NonStream") +
         (info.param.reset ? "Reset" : "Close");
}

class DisconnectTest : public ::testing::TestWithParam<Case> {};

TEST_P(DisconnectTest, AbortsTheEngineRequest) {
  const Case c = GetParam();
  ServerHarness h;
  h.engine().set_script([c](const engine::GenerationRequest&) {
    FakeScript s;
    s.tokens = {kHello, kWorld, kBang, kMore, kMore};
    s.stall = c.stall;
    s.stall_after = 2;
    return s;
  });
  TestHttpClient client(h.port());
  Json body = {{"messages", Json::array({Json{{"role", "user"}, {"content", "Hi"}}})},
               {"stream", c.stream}};
  ASSERT_TRUE(client.send("POST", "/v1/chat/completions", body.dump()));
  ASSERT_TRUE(h.engine().wait_for_submits(1, 5s));
  if (c.stream) {
    std::optional<HttpResult> head = client.read_head();  // headers are sent once admitted
    ASSERT_TRUE(head.has_value());
    EXPECT_EQ(head->status, 200);
  }
  const engine::RequestKey key = h.engine().keys().at(0);
  EXPECT_EQ(h.engine().abort_count(key), 0);
  if (c.reset) {
    client.reset();
  } else {
    client.close();
  }
  EXPECT_TRUE(h.engine().wait_for_aborted(key, 5s)) << "no abort after the client went away";
  EXPECT_EQ(h.engine().abort_count(key), 1);
  EXPECT_TRUE(h.engine().wait_for_idle(5s));
  EXPECT_TRUE(keel::testing::eventually([&] { return h.server().num_connections() == 0; }));
  // The server keeps serving.
  EXPECT_EQ(http_request(h.port(), "GET", "/health").status, 200);
}

INSTANTIATE_TEST_SUITE_P(
    Stages, DisconnectTest,
    ::testing::Values(Case{Stall::kQueued, false, false}, Case{Stall::kQueued, true, false},
                      Case{Stall::kPrefill, false, false}, Case{Stall::kPrefill, true, true},
                      Case{Stall::kDecode, false, true}, Case{Stall::kDecode, true, false},
                      Case{Stall::kDecode, true, true}),
    case_name);

TEST(DisconnectNTest, EveryChoiceOfTheRequestIsAborted) {
  ServerHarness h;
  h.engine().set_script([](const engine::GenerationRequest&) {
    FakeScript s;
    s.tokens = {kHello, kWorld};
    s.stall = Stall::kDecode;
    s.stall_after = 1;
    return s;
  });
  TestHttpClient client(h.port());
  Json body = {{"prompt", Json::array({"a", "b"})}, {"n", 3}, {"stream", true}};
  ASSERT_TRUE(client.send("POST", "/v1/completions", body.dump()));
  ASSERT_TRUE(h.engine().wait_for_submits(6, 5s));
  ASSERT_TRUE(client.read_head().has_value());
  client.close();
  for (engine::RequestKey key : h.engine().keys()) {
    EXPECT_TRUE(h.engine().wait_for_aborted(key, 5s)) << "key " << key;
  }
}

TEST(ShutdownTest, ShutdownWithARequestInFlightAbortsItAndReturns) {
  ServerConfig config = test_config();
  config.shutdown_timeout_ms = 200;  // the stalled request is cut after this
  ServerHarness h(config);
  h.engine().set_script([](const engine::GenerationRequest&) {
    FakeScript s;
    s.tokens = {kHello, kWorld};
    s.stall = Stall::kDecode;
    s.stall_after = 1;
    return s;
  });
  TestHttpClient client(h.port());
  TestHttpClient idle(h.port());  // an idle keep-alive connection
  ASSERT_TRUE(idle.send("GET", "/health"));
  ASSERT_TRUE(idle.read_response().has_value());
  Json body = {{"prompt", "x"}, {"stream", true}};
  ASSERT_TRUE(client.send("POST", "/v1/completions", body.dump()));
  ASSERT_TRUE(h.engine().wait_for_submits(1, 5s));
  h.server().shutdown();
  EXPECT_TRUE(h.engine().wait_for_aborted(h.engine().keys().at(0), 5s));
  EXPECT_TRUE(client.wait_closed(5000));
  EXPECT_TRUE(idle.wait_closed(5000));
  h.server().wait();      // returns at once: already shut down
  h.server().shutdown();  // idempotent
}

}  // namespace
}  // namespace keel::server::testing
