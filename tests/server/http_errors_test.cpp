// Every error status over real HTTP, each with the OpenAI envelope: 400 (malformed JSON, wrong
// types with `param`, context length), 401, 404 (model, path), 405, 413 (Content-Length and
// chunked), 429 with retry-after, 503 (loading, draining), 408 (request timeout); plus CORS
// preflight, /health, and robustness against garbage (the server keeps serving).
#include <gtest/gtest.h>

#include <random>

#include "server_harness.h"

namespace keel::server::testing {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;

Json chat_body() {
  return Json{{"messages", Json::array({Json{{"role", "user"}, {"content", "Hi"}}})}};
}

void expect_error(const HttpResult& r, int status, const std::string& type,
                  std::optional<std::string> param = std::nullopt,
                  std::optional<std::string> code = std::nullopt) {
  EXPECT_EQ(r.status, status) << r.body;
  ASSERT_FALSE(r.body.empty());
  Json j = Json::parse(r.body, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.body;
  ASSERT_TRUE(j.contains("error")) << r.body;
  const Json& e = j["error"];
  EXPECT_TRUE(e["message"].is_string());
  EXPECT_FALSE(e["message"].get<std::string>().empty());
  EXPECT_EQ(e["type"], type);
  EXPECT_TRUE(e.contains("param"));
  EXPECT_TRUE(e.contains("code"));
  if (param) {
    EXPECT_EQ(e["param"], *param);
  }
  if (code) {
    EXPECT_EQ(e["code"], *code);
  }
  EXPECT_FALSE(r.header("x-request-id").empty());
}

class ErrorsHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    h_.engine().set_script([](const engine::GenerationRequest&) {
      FakeScript s;
      s.tokens = {kHello, kEos};
      return s;
    });
  }
  ServerHarness h_;
};

TEST_F(ErrorsHttpTest, MalformedJsonAndWrongTypes) {
  HttpResult r = http_request(h_.port(), "POST", "/v1/chat/completions", "{\"messages\": [");
  expect_error(r, 400, "invalid_request_error");
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("Malformed JSON"),
            std::string::npos);
  Json body = chat_body();
  body["temperature"] = 2.5;
  expect_error(post_json(h_.port(), "/v1/chat/completions", body), 400, "invalid_request_error",
               "temperature");
  body = chat_body();
  body["stream_options"] = {{"include_usage", true}};
  expect_error(post_json(h_.port(), "/v1/chat/completions", body), 400, "invalid_request_error",
               "stream_options");
  expect_error(http_request(h_.port(), "POST", "/v1/completions", "[1,2]"), 400,
               "invalid_request_error", "body");
  expect_error(http_request(h_.port(), "POST", "/v1/completions",
                            std::string(200, '[') + std::string(200, ']')),
               400, "invalid_request_error");
  EXPECT_EQ(h_.engine().submitted().size(), 0u);
}

TEST_F(ErrorsHttpTest, ContextLengthExceeded) {
  Json body = {{"prompt", "Once upon a time"}, {"max_tokens", 250}};
  HttpResult r = post_json(h_.port(), "/v1/completions", body);
  expect_error(r, 400, "invalid_request_error", "prompt", "context_length_exceeded");
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find(
                "This model's maximum context length is 256 tokens. However, you requested"),
            std::string::npos);
  Json long_chat = chat_body();
  long_chat["messages"][0]["content"] = std::string(400, 'x');  // > 256 byte tokens
  expect_error(post_json(h_.port(), "/v1/chat/completions", long_chat), 400,
               "invalid_request_error", "messages", "context_length_exceeded");
  EXPECT_EQ(h_.engine().submitted().size(), 0u);
}

TEST_F(ErrorsHttpTest, ProvablyTooLongPromptsAreRefusedBeforeTokenizing) {
  // 60 KB of text is at least thousands of tokens whatever it says: refused on its byte length.
  const std::string text(60000, 'a');
  for (const auto& [path, body] :
       {std::pair{"/v1/completions", Json{{"prompt", text}}},
        std::pair{"/v1/chat/completions",
                  Json{{"messages", Json::array({Json{{"role", "user"}, {"content", text}}})}}}}) {
    HttpResult r = post_json(h_.port(), path, body);
    expect_error(r, 400, "invalid_request_error", std::nullopt, "context_length_exceeded");
    EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("bytes long, which is at least"),
              std::string::npos)
        << r.body;
  }
  HttpResult t = post_json(h_.port(), "/tokenize", Json{{"prompt", text}});
  expect_error(t, 400, "invalid_request_error", "prompt", "context_length_exceeded");
  EXPECT_EQ(h_.engine().submitted().size(), 0u);
}

TEST(ErrorsConfigTest, JsonWithTooManyValuesIsRefusedBeforeItIsParsed) {
  ServerConfig config = test_config();
  config.max_body_bytes = size_t{2} << 20;
  ServerHarness h(config);
  // 100,000 empty objects: 300 KB of text, but some 10 MB as a parsed JSON tree.
  std::string body = R"({"messages": [)";
  for (int i = 0; i < 100000; ++i) body += "{},";
  body += "{}]}";
  HttpResult r = http_request(h.port(), "POST", "/v1/chat/completions", body);
  expect_error(r, 400, "invalid_request_error", std::nullopt, "request_too_complex");
  std::string ids = R"({"prompt": [)";  // 530,000 token ids: past the value limit too
  for (int i = 0; i < 530000; ++i) ids += "1,";
  ids += "1]}";
  expect_error(http_request(h.port(), "POST", "/v1/completions", ids), 400, "invalid_request_error",
               std::nullopt, "request_too_complex");
  EXPECT_EQ(h.engine().submitted().size(), 0u);
}

TEST_F(ErrorsHttpTest, UnknownModelPathAndMethod) {
  Json body = chat_body();
  body["model"] = "gpt-4o";
  HttpResult r = post_json(h_.port(), "/v1/chat/completions", body);
  expect_error(r, 404, "invalid_request_error", "model", "model_not_found");
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("gpt-4o"), std::string::npos);
  expect_error(http_request(h_.port(), "GET", "/v1/nothing"), 404, "invalid_request_error");
  expect_error(http_request(h_.port(), "GET", "/nope?x=1"), 404, "invalid_request_error");
  HttpResult m = http_request(h_.port(), "GET", "/v1/chat/completions");
  expect_error(m, 405, "invalid_request_error");
  EXPECT_NE(m.header("allow").find("POST"), std::string::npos);
  expect_error(http_request(h_.port(), "POST", "/health", "{}"), 405, "invalid_request_error");
}

TEST_F(ErrorsHttpTest, QueueFullIs429WithRetryAfter) {
  h_.engine().set_queue_full(true);
  HttpResult r = post_json(h_.port(), "/v1/chat/completions", chat_body());
  expect_error(r, 429, "rate_limit_error");
  EXPECT_EQ(r.header("retry-after"), "1");
  h_.engine().set_queue_full(false);
  HttpResult ok = post_json(h_.port(), "/v1/chat/completions", chat_body());
  EXPECT_EQ(ok.status, 200);
}

TEST_F(ErrorsHttpTest, LoadingAndDrainingAre503) {
  h_.ready().store(false);
  expect_error(http_request(h_.port(), "GET", "/health"), 503, "service_unavailable_error");
  expect_error(post_json(h_.port(), "/v1/chat/completions", chat_body()), 503,
               "service_unavailable_error");
  h_.ready().store(true);
  EXPECT_EQ(http_request(h_.port(), "GET", "/health").status, 200);

  TestHttpClient c(h_.port());  // an open keep-alive connection survives stop_accepting()
  ASSERT_TRUE(c.send("GET", "/health"));
  ASSERT_EQ(c.read_response()->status, 200);
  h_.server().stop_accepting();
  ASSERT_TRUE(c.send("GET", "/health"));
  std::optional<HttpResult> health = c.read_response();
  ASSERT_TRUE(health.has_value());
  expect_error(*health, 503, "service_unavailable_error");
  EXPECT_EQ(health->header("connection"), "close");  // draining ends keep-alive
  TestHttpClient c2(h_.port());
  EXPECT_FALSE(c2.connected() && c2.send("GET", "/health") && c2.read_response().has_value());
}

TEST_F(ErrorsHttpTest, EngineUnavailableIs503) {
  h_.engine().set_unavailable(true);
  expect_error(post_json(h_.port(), "/v1/completions", Json{{"prompt", "x"}}), 503,
               "service_unavailable_error");
}

TEST_F(ErrorsHttpTest, CorsIsOffByDefault) {
  // Without --cors-origins no origin is allowed: a web page elsewhere cannot drive the server.
  HttpResult r = http_request(h_.port(), "OPTIONS", "/v1/chat/completions", "",
                              {"Origin: http://evil.example", "Access-Control-Request-Method: POST",
                               "Access-Control-Request-Headers: authorization, content-type"});
  EXPECT_EQ(r.status, 204);
  EXPECT_EQ(r.header("access-control-allow-origin"), "");
  EXPECT_EQ(r.header("access-control-allow-headers"), "");
  EXPECT_EQ(r.header("access-control-allow-methods"), "");
  HttpResult g = http_request(h_.port(), "GET", "/health", "", {"Origin: http://evil.example"});
  EXPECT_EQ(g.status, 200);
  EXPECT_EQ(g.header("access-control-allow-origin"), "");
}

TEST(ErrorsConfigTest, CorsAllowsOnlyTheConfiguredOrigins) {
  ServerConfig config = test_config();
  config.cors_allowed_origins = {"http://app.example"};
  ServerHarness h(config);
  HttpResult r = http_request(h.port(), "OPTIONS", "/v1/chat/completions", "",
                              {"Origin: http://app.example", "Access-Control-Request-Method: POST",
                               "Access-Control-Request-Headers: authorization, x-stainless-os"});
  EXPECT_EQ(r.status, 204);
  EXPECT_EQ(r.header("access-control-allow-origin"), "http://app.example");
  EXPECT_EQ(r.header("vary"), "Origin");
  EXPECT_NE(r.header("access-control-allow-methods").find("POST"), std::string::npos);
  EXPECT_NE(r.header("access-control-allow-headers").find("x-stainless-os"), std::string::npos);
  HttpResult other = http_request(h.port(), "OPTIONS", "/v1/chat/completions", "",
                                  {"Origin: http://evil.example"});
  EXPECT_EQ(other.header("access-control-allow-origin"), "");
  EXPECT_EQ(other.header("access-control-allow-headers"), "");
  // "*" must be asked for explicitly.
  config.cors_allowed_origins = {"*"};
  ServerHarness any(config);
  HttpResult g = http_request(any.port(), "GET", "/health", "", {"Origin: http://example.com"});
  EXPECT_EQ(g.header("access-control-allow-origin"), "*");
}

TEST_F(ErrorsHttpTest, MoreChoicesThanTheQueueHoldsIs400) {
  h_.engine().set_max_waiting(2);
  Json body = chat_body();
  body["n"] = 3;
  HttpResult r = post_json(h_.port(), "/v1/chat/completions", body);
  expect_error(r, 400, "invalid_request_error", "n", "too_many_choices");
  EXPECT_EQ(r.header("retry-after"), "");
  Json prompts = {{"prompt", Json::array({"a", "b", "c"})}, {"max_tokens", 1}};
  expect_error(post_json(h_.port(), "/v1/completions", prompts), 400, "invalid_request_error", "n",
               "too_many_choices");
  EXPECT_EQ(h_.engine().submitted().size(), 0u);
  body["n"] = 2;  // fits
  EXPECT_EQ(post_json(h_.port(), "/v1/chat/completions", body).status, 200);
}

TEST_F(ErrorsHttpTest, GarbageNeverTakesTheServerDown) {
  std::mt19937 rng(99);
  for (int i = 0; i < 40; ++i) {
    std::string junk(std::uniform_int_distribution<size_t>(0, 3000)(rng), '\0');
    for (char& ch : junk) ch = static_cast<char>(rng());
    const char* path = (i % 3 == 0)   ? "/v1/chat/completions"
                       : (i % 3 == 1) ? "/v1/completions"
                                      : "/tokenize";
    HttpResult r = http_request(h_.port(), "POST", path, junk);
    EXPECT_EQ(r.status, 400) << "iteration " << i;
  }
  for (const char* raw :
       {"GARBAGE\r\n\r\n", "GET / HTTP/1.1\r\nNoColonHere\r\n\r\n", "\x01\x02\x03\r\n\r\n",
        "POST /v1/completions HTTP/1.1\r\nContent-Length: nope\r\n\r\n"}) {
    TestHttpClient c(h_.port());
    ASSERT_TRUE(c.send_raw(raw));
    std::optional<HttpResult> r = c.read_response();
    if (r) {
      EXPECT_EQ(r->status, 400) << raw;
    }
    EXPECT_TRUE(c.wait_closed(5000));
  }
  EXPECT_EQ(http_request(h_.port(), "GET", "/health").status, 200);
}

TEST(ErrorsConfigTest, ApiKeyGuardsV1AndTokenizeOnly) {
  ServerConfig cfg = test_config();
  cfg.api_key = "sekret";
  ServerHarness h(cfg);
  h.engine().set_script([](const engine::GenerationRequest&) {
    FakeScript s;
    s.tokens = {kHello};
    return s;
  });
  expect_error(post_json(h.port(), "/v1/chat/completions", chat_body()), 401,
               "invalid_request_error", std::nullopt, "invalid_api_key");
  expect_error(
      post_json(h.port(), "/v1/chat/completions", chat_body(), {"Authorization: Bearer nope"}), 401,
      "invalid_request_error");
  expect_error(http_request(h.port(), "GET", "/v1/models", "", {"Authorization: sekret"}), 401,
               "invalid_request_error");
  expect_error(post_json(h.port(), "/tokenize", Json{{"prompt", "x"}}), 401,
               "invalid_request_error");
  EXPECT_EQ(
      post_json(h.port(), "/v1/chat/completions", chat_body(), {"Authorization: Bearer sekret"})
          .status,
      200);
  EXPECT_EQ(
      http_request(h.port(), "GET", "/v1/models", "", {"authorization: bearer sekret"}).status,
      200);
  EXPECT_EQ(http_request(h.port(), "GET", "/health").status, 200);
  EXPECT_EQ(http_request(h.port(), "GET", "/metrics").status, 200);
  EXPECT_EQ(http_request(h.port(), "OPTIONS", "/v1/models").status, 204);
}

TEST(ErrorsConfigTest, OversizeBodiesAre413AndClose) {
  ServerConfig cfg = test_config();
  cfg.max_body_bytes = 2048;
  ServerHarness h(cfg);
  {  // Content-Length over the limit: refused before the body is read.
    TestHttpClient c(h.port());
    ASSERT_TRUE(
        c.send_raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                   "application/json\r\nContent-Length: 100000000\r\n\r\n{"));
    std::optional<HttpResult> r = c.read_response();
    ASSERT_TRUE(r.has_value());
    expect_error(*r, 413, "invalid_request_error");
    EXPECT_TRUE(c.wait_closed(5000));
  }
  {  // Chunked body growing past the limit: the body parser stops it.
    TestHttpClient c(h.port());
    std::string req =
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 5; ++i) req += "400\r\n" + std::string(0x400, 'a') + "\r\n";
    req += "0\r\n\r\n";
    ASSERT_TRUE(c.send_raw(req) || true);  // the server may close before reading it all
    std::optional<HttpResult> r = c.read_response();
    ASSERT_TRUE(r.has_value());
    expect_error(*r, 413, "invalid_request_error");
  }
  {  // Exactly at the limit is fine (a 400 for the bad prompt, not a 413).
    std::string body = "{\"prompt\": \"" + std::string(2048 - 14, 'a') + "\"}";
    ASSERT_EQ(body.size(), 2048u);
    HttpResult r = http_request(h.port(), "POST", "/v1/completions", body);
    EXPECT_NE(r.status, 413);
  }
  EXPECT_EQ(http_request(h.port(), "GET", "/health").status, 200);
}

TEST(ErrorsConfigTest, RequestTimeoutAbortsAndAnswers408) {
  ServerConfig cfg = test_config();
  cfg.request_timeout_ms = 200;
  ServerHarness h(cfg);
  h.engine().set_script([](const engine::GenerationRequest&) {
    FakeScript s;
    s.stall = FakeScript::Stall::kQueued;
    return s;
  });
  HttpResult r = post_json(h.port(), "/v1/chat/completions", chat_body());
  expect_error(r, 408, "timeout_error");
  ASSERT_EQ(h.engine().keys().size(), 1u);
  EXPECT_TRUE(h.engine().wait_for_aborted(h.engine().keys()[0], 5s));
}

}  // namespace
}  // namespace keel::server::testing
