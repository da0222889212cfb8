// Base-URL parsing, API flavour detection and the JSON bodies sent to /v1/completions and
// /v1/chat/completions (what vLLM's benchmark sends, plus --extra-body overrides).
#include "loadgen/endpoint.h"

#include <gtest/gtest.h>

namespace keel::loadgen {
namespace {

using nlohmann::json;

TEST(EndpointTest, ParsesBaseUrls) {
  auto a = parse_base_url("http://127.0.0.1:8000");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, "8000");
  EXPECT_EQ(a->base_path, "");
  auto b = parse_base_url("http://example.com/proxy/");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "example.com");
  EXPECT_EQ(b->port, "80");
  EXPECT_EQ(b->base_path, "/proxy");
  auto c = parse_base_url("http://[::1]:9000");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, "9000");
}

TEST(EndpointTest, RejectsBadBaseUrlsWithTheReason) {
  auto expect_bad = [](const char* url, const char* needle) {
    auto r = parse_base_url(url);
    ASSERT_FALSE(r.ok()) << url;
    EXPECT_NE(r.error().message().find(needle), std::string::npos) << r.error().message();
  };
  expect_bad("https://x:1", "https is not supported");
  expect_bad("localhost:8000", "must start with http://");
  expect_bad("http://:8000", "no host");
  expect_bad("http://h:0", "bad port");
  expect_bad("http://h:99999", "bad port");
  expect_bad("http://h:80x", "bad port");
  expect_bad("http://[::1", "unclosed");
}

TEST(EndpointTest, ApiKindFromEndpoint) {
  EXPECT_EQ(api_kind_for("/v1/completions"), ApiKind::kCompletions);
  EXPECT_EQ(api_kind_for("/v1/chat/completions"), ApiKind::kChatCompletions);
  EXPECT_EQ(api_kind_for("/v1/chat/completions/"), ApiKind::kChatCompletions);
  EXPECT_EQ(backend_name(ApiKind::kChatCompletions), "openai-chat");
}

TEST(EndpointTest, CompletionBodyWithTokenIds) {
  PromptSpec p{.token_ids = {5, 6, 7}, .prompt_len = 3, .output_len = 12};
  auto body = build_request_body(p, {.model = "m"});
  ASSERT_TRUE(body.ok());
  json j = json::parse(*body);
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["prompt"], json({5, 6, 7}));
  EXPECT_EQ(j["max_tokens"], 12);
  EXPECT_EQ(j["temperature"], 0.0);
  EXPECT_EQ(j["ignore_eos"], true);
  EXPECT_EQ(j["stream"], true);
  EXPECT_EQ(j["stream_options"]["include_usage"], true);
  EXPECT_FALSE(j.contains("messages"));
}

TEST(EndpointTest, ChatBodyWithTextAndExtraBodyOverrides) {
  PromptSpec p{.text = "the cat", .prompt_len = 2, .output_len = 4};
  RequestBodyOptions o{.api = ApiKind::kChatCompletions,
                       .model = "m",
                       .temperature = 0.5,
                       .ignore_eos = false,
                       .extra_body = {{"top_k", 1}, {"temperature", 0.9}}};
  auto body = build_request_body(p, o);
  ASSERT_TRUE(body.ok());
  json j = json::parse(*body);
  EXPECT_EQ(j["messages"], json::parse(R"([{"role":"user","content":"the cat"}])"));
  EXPECT_EQ(j["max_completion_tokens"], 4);
  EXPECT_EQ(j["max_tokens"], 4);
  EXPECT_EQ(j["temperature"], 0.9);
  EXPECT_EQ(j["top_k"], 1);
  EXPECT_FALSE(j.contains("ignore_eos"));
  EXPECT_FALSE(j.contains("prompt"));
}

TEST(EndpointTest, TokenIdsCannotGoToChat) {
  PromptSpec p{.token_ids = {1}, .prompt_len = 1, .output_len = 1};
  auto body = build_request_body(p, {.api = ApiKind::kChatCompletions});
  ASSERT_FALSE(body.ok());
  EXPECT_NE(body.error().message().find("--prompt-format text"), std::string::npos);
}

TEST(EndpointTest, RagBodyMarksEachDocumentPositionIndependent) {
  PromptSpec p{.text = "who", .prompt_len = 3, .output_len = 2, .documents = {"a b", "c"}};
  auto body = build_request_body(p, {.api = ApiKind::kChatCompletions, .model = "m"});
  ASSERT_TRUE(body.ok());
  const json j = json::parse(*body);
  EXPECT_EQ(j["messages"], json::parse(R"([
    {"role": "system", "content": [
      {"type": "text", "text": "a b", "cache_control": {"type": "position_independent"}},
      {"type": "text", "text": "c", "cache_control": {"type": "position_independent"}}]},
    {"role": "user", "content": "who"}])"));
  EXPECT_FALSE(build_request_body(p, {.api = ApiKind::kCompletions}).ok());
}

}  // namespace
}  // namespace keel::loadgen
