// The server's context-cache description (what the engine keeps for it, opaque): chat caches
// round-trip their messages with every field, prompt caches their kind and model; anything this
// server did not write is refused; the cache object's times are whole seconds, expires_at - created
// = ttl.
#include "server/context_cache.h"

#include <gtest/gtest.h>

namespace keel::server {
namespace {

TEST(ContextCacheDescriptionTest, RoundTrips) {
  CacheDescription chat;
  chat.kind = ApiKind::kChat;
  chat.model = "m";
  chat.messages = {{"system", "be brief", "", ""},
                   {"user", "caf\xC3\xA9 \"quoted\"\n", "ann", ""},
                   {"assistant", "", "", "", nlohmann::ordered_json::parse(R"([{"id": "call-1",
                     "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}])")},
                   {"tool", "42", "", "call-1"}};
  const std::optional<CacheDescription> back =
      decode_cache_description(encode_cache_description(chat));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->kind, ApiKind::kChat);
  EXPECT_EQ(back->model, "m");
  ASSERT_EQ(back->messages.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(back->messages[i].role, chat.messages[i].role);
    EXPECT_EQ(back->messages[i].content, chat.messages[i].content);
    EXPECT_EQ(back->messages[i].name, chat.messages[i].name);
    EXPECT_EQ(back->messages[i].tool_call_id, chat.messages[i].tool_call_id);
    EXPECT_EQ(back->messages[i].tool_calls, chat.messages[i].tool_calls);
  }
  CacheDescription prompt;
  prompt.kind = ApiKind::kCompletion;
  prompt.model = "p";
  const auto p = decode_cache_description(encode_cache_description(prompt));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->kind, ApiKind::kCompletion);
  EXPECT_TRUE(p->messages.empty());
}

TEST(ContextCacheDescriptionTest, RefusesForeignDescriptions) {
  for (const char* text : {"", "not json", "[]", "{}", R"({"source":"files","model":"m"})",
                           R"({"source":"messages","model":"m"})",
                           R"({"source":"messages","model":"m","messages":[{"role":1}]})",
                           R"({"source":"prompt","model":7})"}) {
    EXPECT_FALSE(decode_cache_description(text).has_value()) << text;
  }
}

TEST(ContextCacheDescriptionTest, CacheObject) {
  engine::ContextCacheInfo info;
  info.id = "cache-1";
  info.tokens = {1, 2, 3};
  info.ttl_ms = 600'000;
  info.created_unix_ms = 1'700'000'000'999;
  CacheDescription d;
  d.kind = ApiKind::kCompletion;
  d.model = "m";
  const nlohmann::json j = cache_object(info, d);
  EXPECT_EQ(j["id"], "cache-1");
  EXPECT_EQ(j["object"], "cache");
  EXPECT_EQ(j["source"], "prompt");
  EXPECT_EQ(j["num_tokens"], 3);
  EXPECT_EQ(j["ttl"], 600);
  EXPECT_EQ(j["created"], 1'700'000'000);
  EXPECT_EQ(j["expires_at"], 1'700'000'600);
}

}  // namespace
}  // namespace keel::server
