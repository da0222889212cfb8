// Position-independent chunks in chat requests over real HTTP against the fake engine: parts
// marked cache_control position_independent become chunk spans of the engine request (each chunk
// tokenized alone with its own BOS, the rest around them without), `pic_link` is forwarded;
// --pic auto marks every message before the last user message, --pic off ignores marks; the
// markers never reach the prompt text (/tokenize); bad cache_control, reserved markers in user
// text and bad pic_link values are 400s.
#include <gtest/gtest.h>

#include <algorithm>

#include "server/pic_segments.h"
#include "server_harness.h"

namespace keel::server::testing {
namespace {

using Json = nlohmann::json;

Json part(const std::string& text, bool pic) {
  Json p = {{"type", "text"}, {"text", text}};
  if (pic) p["cache_control"] = {{"type", "position_independent"}};
  return p;
}

Json body(Json system_parts, const std::string& question = "Hi") {
  return {{"messages", Json::array({Json{{"role", "system"}, {"content", std::move(system_parts)}},
                                    Json{{"role", "user"}, {"content", question}}})},
          {"max_tokens", 2}};
}

class PicHttpTest : public ::testing::Test {
 protected:
  explicit PicHttpTest(const std::string& mode = "marked") : h_(config(mode)) {
    h_.engine().set_script([](const engine::GenerationRequest&) {
      FakeScript s;
      s.tokens = {kHello};
      return s;
    });
  }
  static ServerConfig config(const std::string& mode) {
    ServerConfig c = test_config();
    c.pic_mode = mode;
    return c;
  }
  std::vector<int32_t> enc(const std::string& text, bool special) {
    return h_.tokenizer().encode(text, special, true);
  }
  engine::GenerationRequest last() { return h_.engine().submitted().back(); }
  ServerHarness h_;
};

TEST_F(PicHttpTest, MarkedPartsBecomeChunkSpans) {
  Json b = body(Json::array({part("Hello world", true), part("The end", true)}));
  b["pic_link"] = "legolink-4";
  HttpResult r = post_json(h_.port(), "/v1/chat/completions", b);
  ASSERT_EQ(r.status, 200) << r.body;
  const engine::GenerationRequest req = last();
  // ChatML: "<|im_start|>system\n" [chunk "Hello world"] "\n" [chunk "The end"] "<|im_end|>\n..."
  std::vector<int32_t> want = enc("<|im_start|>system\n", true);
  const std::vector<int32_t> c1 = enc("Hello world", true), c2 = enc("The end", true);
  ASSERT_EQ(req.pic_chunks.size(), 2u);
  EXPECT_EQ(req.pic_chunks[0].start, static_cast<int32_t>(want.size()));
  EXPECT_EQ(req.pic_chunks[0].len, static_cast<int32_t>(c1.size()));
  want.insert(want.end(), c1.begin(), c1.end());
  const std::vector<int32_t> gap = enc("\n", false);
  want.insert(want.end(), gap.begin(), gap.end());
  EXPECT_EQ(req.pic_chunks[1].start, static_cast<int32_t>(want.size()));
  want.insert(want.end(), c2.begin(), c2.end());
  const std::vector<int32_t> rest =
      enc("<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
          "<|im_start|>assistant\n",
          false);
  want.insert(want.end(), rest.begin(), rest.end());
  EXPECT_EQ(req.prompt_tokens, want);
  EXPECT_EQ(req.prompt_tokens[static_cast<size_t>(req.pic_chunks[1].start)], kBos);
  ASSERT_TRUE(req.pic_link.has_value());
  EXPECT_EQ(req.pic_link->name(), "legolink-4");
  // Unmarked parts: no chunks, one BOS.
  ASSERT_EQ(
      post_json(h_.port(), "/v1/chat/completions", body(Json::array({part("Hello world", false)})))
          .status,
      200);
  EXPECT_TRUE(last().pic_chunks.empty());
  EXPECT_FALSE(last().pic_link.has_value());
  // /tokenize renders the same messages without markers.
  HttpResult t = post_json(h_.port(), "/tokenize", body(Json::array({part("Hello world", true)})));
  ASSERT_EQ(t.status, 200) << t.body;
  std::vector<ChatMessage> plain = {{.role = "system", .content = "Hello world"},
                                    {.role = "user", .content = "Hi"}};
  EXPECT_EQ(t.json()["tokens"].get<std::vector<int32_t>>(), enc(*chatml(plain, true), true));
}

TEST_F(PicHttpTest, Errors) {
  Json bad_type = body(Json::array({part("x", false)}));
  bad_type["messages"][0]["content"][0]["cache_control"] = {{"type", "forever"}};
  Json not_object = body(Json::array({part("x", false)}));
  not_object["messages"][0]["content"][0]["cache_control"] = "pic";
  Json ephemeral = body(Json::array({part("x", false)}));
  ephemeral["messages"][0]["content"][0]["cache_control"] = {{"type", "ephemeral"}};
  Json marker = body(Json::array({part(std::string("a") + std::string(kPicBegin) + "b", false)}));
  Json marker_string = body(Json::array({part("x", false)}), std::string(kPicEnd));
  Json bad_link = body(Json::array({part("x", true)}));
  bad_link["pic_link"] = "cacheblend-101";
  Json bad_link2 = bad_link;
  bad_link2["pic_link"] = 4;
  EXPECT_EQ(post_json(h_.port(), "/v1/chat/completions", ephemeral).status, 200);
  for (const Json& b : {bad_type, not_object, marker, marker_string, bad_link, bad_link2}) {
    HttpResult r = post_json(h_.port(), "/v1/chat/completions", b);
    EXPECT_EQ(r.status, 400) << b.dump() << " → " << r.body;
  }
}

class PicAutoHttpTest : public PicHttpTest {
 protected:
  PicAutoHttpTest() : PicHttpTest("auto") {}
};

TEST_F(PicAutoHttpTest, EveryMessageBeforeTheLastUserTurnIsAChunk) {
  const Json b = {{"messages", Json::array({Json{{"role", "system"}, {"content", "Hello world"}},
                                            Json{{"role", "user"}, {"content", "The end"}},
                                            Json{{"role", "assistant"}, {"content", "more"}},
                                            Json{{"role", "user"}, {"content", "Hi"}}})}};
  ASSERT_EQ(post_json(h_.port(), "/v1/chat/completions", b).status, 200);
  const engine::GenerationRequest req = last();
  ASSERT_EQ(req.pic_chunks.size(), 3u);
  for (const kv::PicChunk& c : req.pic_chunks) {
    EXPECT_EQ(req.prompt_tokens[static_cast<size_t>(c.start)], kBos);
  }
  const std::vector<int32_t> more = enc("more", true);
  const kv::PicChunk& third = req.pic_chunks[2];
  EXPECT_EQ(std::vector<int32_t>(req.prompt_tokens.begin() + third.start,
                                 req.prompt_tokens.begin() + third.start + third.len),
            more);
}

class PicOffHttpTest : public PicHttpTest {
 protected:
  PicOffHttpTest() : PicHttpTest("off") {}
};

TEST_F(PicOffHttpTest, MarksAreIgnored) {
  ASSERT_EQ(
      post_json(h_.port(), "/v1/chat/completions", body(Json::array({part("Hello world", true)})))
          .status,
      200);
  EXPECT_TRUE(last().pic_chunks.empty());
  std::vector<ChatMessage> plain = {{.role = "system", .content = "Hello world"},
                                    {.role = "user", .content = "Hi"}};
  EXPECT_EQ(last().prompt_tokens, enc(*chatml(plain, true), true));
}

TEST(PicSegmentsTest, SplitAndStrip) {
  const std::string text = "a" + mark_pic("b") + "c" + mark_pic("") + "d";
  EXPECT_EQ(strip_pic_marks(text), "abcd");
  EXPECT_TRUE(has_pic_marks(text));
  EXPECT_FALSE(has_pic_marks("abcd"));
  const tokenizer::Tokenizer tok = make_test_tokenizer();
  using tokenizer::TrackedText;
  EXPECT_FALSE(tokenize_pic(tok, TrackedText{std::string(kPicEnd) + "x", {}}).ok());
  EXPECT_FALSE(tokenize_pic(tok, TrackedText{std::string(kPicBegin) + "x", {}}).ok());
  EXPECT_FALSE(tokenize_pic(tok, TrackedText{mark_pic(mark_pic("x")), {}}).ok());
  Result<PicTokens> t = tokenize_pic(tok, TrackedText{text, {}});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->chunks.size(), 1u);  // the empty chunk has no tokens
  // Stripping the marks keeps each plain span on the bytes it covered.
  const std::string marked = "<" + mark_pic("b</s>") + ">";
  const size_t b = marked.find("b</s>");
  const TrackedText stripped = strip_pic_marks(TrackedText{marked, {{b, b + 5}}});
  EXPECT_EQ(stripped.text, "<b</s>>");
  EXPECT_EQ(stripped.plain, (tokenizer::TextSpans{{1, 6}}));
  // A chunk written by a user is text: its "</s>" is no EOS.
  Result<PicTokens> chunk = tokenize_pic(tok, TrackedText{marked, {{b, b + 5}}});
  ASSERT_TRUE(chunk.ok());
  EXPECT_EQ(std::count(chunk->tokens.begin(), chunk->tokens.end(), kEos), 0);
  Result<PicTokens> markup = tokenize_pic(tok, TrackedText{marked, {}});
  ASSERT_TRUE(markup.ok());
  EXPECT_EQ(std::count(markup->tokens.begin(), markup->tokens.end(), kEos), 1);
}

}  // namespace
}  // namespace keel::server::testing
