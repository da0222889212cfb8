// parse_stream_chunk and error_message_from_body over completion and chat chunk shapes, usage
// chunks, [DONE], error payloads and junk.
#include "loadgen/stream_chunk.h"

#include <gtest/gtest.h>

namespace keel::loadgen {
namespace {

TEST(StreamChunkTest, CompletionTextChunk) {
  auto c = parse_stream_chunk(
      R"({"id":"c","object":"text_completion","choices":[{"index":0,"text":" hi","finish_reason":null}],"usage":null})");
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(c->kind, ChunkKind::kContent);
  EXPECT_EQ(c->text, " hi");
  EXPECT_FALSE(c->completion_tokens.has_value());
}

TEST(StreamChunkTest, ChatDeltaChunksIncludingRoleOnlyAndReasoning) {
  auto role = parse_stream_chunk(R"({"choices":[{"index":0,"delta":{"role":"assistant"}}]})");
  ASSERT_TRUE(role.ok());
  EXPECT_EQ(role->kind, ChunkKind::kContent);  // non-empty choices counts, as in vLLM
  EXPECT_EQ(role->text, "");
  auto content = parse_stream_chunk(R"({"choices":[{"delta":{"content":"Hel"}}]})");
  ASSERT_TRUE(content.ok());
  EXPECT_EQ(content->text, "Hel");
  auto reasoning = parse_stream_chunk(R"({"choices":[{"delta":{"reasoning_content":"hmm"}}]})");
  ASSERT_TRUE(reasoning.ok());
  EXPECT_EQ(reasoning->text, "hmm");
  auto null_content = parse_stream_chunk(R"({"choices":[{"delta":{"content":null}}]})");
  ASSERT_TRUE(null_content.ok());
  EXPECT_EQ(null_content->kind, ChunkKind::kContent);
}

TEST(StreamChunkTest, UsageChunk) {
  auto c = parse_stream_chunk(
      R"({"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, ChunkKind::kNoChoices);
  EXPECT_EQ(c->completion_tokens, 3);
  EXPECT_EQ(c->prompt_tokens, 9);
}

TEST(StreamChunkTest, Done) {
  for (const char* s : {"[DONE]", "[DONE] ", "[DONE]\n"}) {
    auto c = parse_stream_chunk(s);
    ASSERT_TRUE(c.ok()) << s;
    EXPECT_EQ(c->kind, ChunkKind::kDone);
  }
}

TEST(StreamChunkTest, ErrorPayloads) {
  auto obj = parse_stream_chunk(R"({"error":{"message":"boom","type":"server_error","code":500}})");
  ASSERT_TRUE(obj.ok());
  EXPECT_EQ(obj->kind, ChunkKind::kError);
  EXPECT_EQ(obj->error_message, "boom");
  auto str = parse_stream_chunk(R"({"error":"Unauthorized"})");
  ASSERT_TRUE(str.ok());
  EXPECT_EQ(str->kind, ChunkKind::kError);
  EXPECT_EQ(str->error_message, "Unauthorized");
  auto null_error = parse_stream_chunk(R"({"error":null,"choices":[{"text":"x"}]})");
  ASSERT_TRUE(null_error.ok());
  EXPECT_EQ(null_error->kind, ChunkKind::kContent);
}

TEST(StreamChunkTest, MalformedPayloadsAreErrorsQuotingThePayload) {
  for (const char* s : {"{not json", "42", "[1,2]", "", "\"str\""}) {
    auto c = parse_stream_chunk(s);
    ASSERT_FALSE(c.ok()) << s;
    EXPECT_NE(c.error().message().find("malformed SSE data"), std::string::npos);
  }
  auto c = parse_stream_chunk("{oops");
  EXPECT_NE(c.error().message().find("{oops"), std::string::npos);
}

TEST(StreamChunkTest, OddButValidLayoutsAreTolerated) {
  auto c = parse_stream_chunk(R"({"choices":[5],"usage":{"completion_tokens":"x"}})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, ChunkKind::kContent);
  EXPECT_EQ(c->text, "");
  EXPECT_FALSE(c->completion_tokens.has_value());
}

TEST(StreamChunkTest, ErrorMessageFromBody) {
  EXPECT_EQ(error_message_from_body(R"({"error":{"message":"model x does not exist"}})"),
            "model x does not exist");
  EXPECT_EQ(error_message_from_body(R"({"error":"Unauthorized"})"), "Unauthorized");
  EXPECT_EQ(error_message_from_body(R"({"detail":"Not Found"})"), "Not Found");
  EXPECT_EQ(error_message_from_body("plain\ntext"), "plain text");
  EXPECT_EQ(error_message_from_body(std::string(500, 'a'), 10), "aaaaaaaaaa...");
}

}  // namespace
}  // namespace keel::loadgen
