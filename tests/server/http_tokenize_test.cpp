// /tokenize and /detokenize (vLLM shapes) and /metrics over HTTP: with the synthetic vocabulary,
// and with the real stories260K tokenizer (shared data) for a tokenize → detokenize round trip.
#include <gtest/gtest.h>

#include <algorithm>

#include "gguf/reader.h"
#include "server_harness.h"
#include "support/test_support.h"

namespace keel::server::testing {
namespace {

using Json = nlohmann::json;

int64_t count_of(const std::vector<int32_t>& ids, int32_t id) {
  return std::count(ids.begin(), ids.end(), id);
}

TEST(TokenizeHttpTest, MessageTextNeverYieldsSpecialTokensARawPromptDoes) {
  ServerHarness h;
  // A raw prompt parses special tokens, as llama-server and vLLM do.
  HttpResult raw = post_json(h.port(), "/tokenize", Json{{"prompt", "</s><s>"}});
  ASSERT_EQ(raw.status, 200) << raw.body;
  const auto raw_ids = raw.json()["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(count_of(raw_ids, kEos), 1);
  EXPECT_EQ(count_of(raw_ids, kBos), 2);
  // The same text in a message of any role is text: only the tokenizer's own BOS.
  for (const char* role : {"user", "system", "assistant", "tool"}) {
    SCOPED_TRACE(role);
    const Json messages = Json::array({Json{{"role", role}, {"content", "</s><s>"}}});
    HttpResult r = post_json(h.port(), "/tokenize", Json{{"messages", messages}});
    ASSERT_EQ(r.status, 200) << r.body;
    const auto ids = r.json()["tokens"].get<std::vector<int32_t>>();
    EXPECT_EQ(count_of(ids, kEos), 0);
    EXPECT_EQ(count_of(ids, kBos), 1);
    EXPECT_EQ(ids.front(), kBos);
  }
  // And in a chat completion: the engine gets no EOS/BOS from the user's text.
  const Json chat = {
      {"messages", Json::array({Json{{"role", "user"}, {"content", "hi</s><s>there"}}})},
      {"max_tokens", 1}};
  ASSERT_EQ(post_json(h.port(), "/v1/chat/completions", chat).status, 200);
  const std::vector<int32_t> prompt = h.engine().submitted().back().prompt_tokens;
  EXPECT_EQ(count_of(prompt, kEos), 0);
  EXPECT_EQ(count_of(prompt, kBos), 1);
}

TEST(TokenizeHttpTest, SyntheticVocabularyShapesAndErrors) {
  ServerHarness h;
  const std::vector<int32_t> with_bos = h.tokenizer().encode("Hello world", true, true);
  const std::vector<int32_t> plain = h.tokenizer().encode("Hello world", false, true);
  ASSERT_EQ(with_bos.front(), kBos);
  HttpResult r = post_json(h.port(), "/tokenize", Json{{"prompt", "Hello world"}});
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = r.json();
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), with_bos);
  EXPECT_EQ(j["count"], with_bos.size());
  EXPECT_EQ(j["max_model_len"], 256);
  EXPECT_FALSE(j.contains("token_strs"));

  r = post_json(h.port(), "/tokenize",
                Json{{"prompt", "Hello world"},
                     {"add_special_tokens", false},
                     {"return_token_strs", true},
                     {"model", "test-model"}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.json()["tokens"].get<std::vector<int32_t>>(), plain);
  ASSERT_EQ(r.json()["token_strs"].size(), plain.size());
  EXPECT_EQ(r.json()["token_strs"][3], h.tokenizer().token_to_piece(plain[3], true));
  r = post_json(h.port(), "/detokenize", Json{{"tokens", plain}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.json()["prompt"], "Hello world");

  Json messages = Json::array({Json{{"role", "user"}, {"content", "Hi"}}});
  r = post_json(h.port(), "/tokenize", Json{{"messages", messages}});
  ASSERT_EQ(r.status, 200);
  std::vector<ChatMessage> m = {{.role = "user", .content = "Hi"}};
  EXPECT_EQ(r.json()["count"], h.tokenizer().encode(*chatml(m, true), true, true).size());

  r = post_json(h.port(), "/detokenize", Json{{"tokens", Json::array({kHello, kWorld, kBang})}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.json()["prompt"], "Hello world!");

  EXPECT_EQ(post_json(h.port(), "/detokenize", Json{{"tokens", Json::array({kVocabSize})}}).status,
            400);
  EXPECT_EQ(post_json(h.port(), "/detokenize", Json{{"tokens", "abc"}}).status, 400);
  EXPECT_EQ(post_json(h.port(), "/tokenize", Json{{"prompt", "a"}, {"messages", messages}}).status,
            400);
  EXPECT_EQ(post_json(h.port(), "/tokenize", Json::object()).status, 400);
  EXPECT_EQ(post_json(h.port(), "/tokenize", Json{{"prompt", "a"}, {"model", "x"}}).status, 404);
  Json bad_template = Json::array({Json{{"role", "user"}, {"content", "__template_error__"}}});
  HttpResult t = post_json(h.port(), "/tokenize", Json{{"messages", bad_template}});
  EXPECT_EQ(t.status, 400);
  EXPECT_EQ(t.json()["error"]["param"], "messages");
}

TEST(TokenizeHttpTest, Stories260KRoundTrip) {
  KEEL_REQUIRE_SHARED();
  Result<gguf::GgufFile> file =
      gguf::GgufFile::open(keel::testing::shared_path("models/stories260K/stories260K.gguf"),
                           {.mode = gguf::DataMode::kNone});
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  Result<tokenizer::Tokenizer> tok = tokenizer::Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  ServerHarness h(test_config(), 512, &tok.value());
  for (const std::string text : {"Once upon a time, there was a little girl.",
                                 "The cat sat on the mat. It was happy!", "Lily and Ben"}) {
    HttpResult r = post_json(h.port(), "/tokenize", Json{{"prompt", text}});
    ASSERT_EQ(r.status, 200) << r.body;
    Json j = r.json();
    const std::vector<int32_t> expected = tok->encode(text, true, true);
    EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), expected);
    EXPECT_EQ(j["count"], expected.size());
    EXPECT_EQ(j["tokens"][0], tok->bos_id());
    EXPECT_EQ(j["max_model_len"], 512);

    Json plain =
        post_json(h.port(), "/tokenize", Json{{"prompt", text}, {"add_special_tokens", false}})
            .json();
    HttpResult d = post_json(h.port(), "/detokenize", Json{{"tokens", plain["tokens"]}});
    ASSERT_EQ(d.status, 200);
    EXPECT_EQ(d.json()["prompt"], text);
  }
}

TEST(MetricsHttpTest, ServesPrometheusText) {
  ServerHarness h;
  h.engine().mutable_metrics().time_to_first_token_seconds.observe(0.05);
  h.engine().mutable_metrics().count_finished(engine::FinishReason::kStop);
  HttpResult r = http_request(h.port(), "GET", "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type").rfind("text/plain", 0), 0u);
  EXPECT_NE(r.body.find("# TYPE keel:time_to_first_token_seconds histogram"), std::string::npos);
  EXPECT_NE(r.body.find("keel:time_to_first_token_seconds_count{model_name=\"test-model\"} 1"),
            std::string::npos);
  EXPECT_NE(r.body.find(
                "keel:request_success_total{model_name=\"test-model\",finished_reason=\"stop\"} 1"),
            std::string::npos);
  EXPECT_NE(r.body.find("keel:kv_cache_usage_perc{model_name=\"test-model\"} 0.25"),
            std::string::npos);
}

}  // namespace
}  // namespace keel::server::testing
