// /v1/chat/completions and /v1/completions over real HTTP against the fake engine: response and
// chunk shapes, usage (only when asked in streams), n > 1, multiple prompts, echo, stop strings
// split across tokens (never emitted; the engine finishes the request), logprobs in both formats,
// keep-alive reuse.
#include <gtest/gtest.h>

#include <set>

#include "server_harness.h"

namespace keel::server::testing {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;

Json chat(bool stream = false) {
  Json j = {{"model", "test-model"},
            {"messages", Json::array({Json{{"role", "user"}, {"content", "Hi"}}})}};
  if (stream) j["stream"] = true;
  return j;
}

FakeScript hello_script() {
  FakeScript s;
  s.tokens = {kHello, kWorld, kBang, kEos};
  s.finish = engine::FinishReason::kStop;
  s.num_cached_tokens = 2;
  return s;
}

class GenerationHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    h_.engine().set_script([](const engine::GenerationRequest&) { return hello_script(); });
  }
  std::vector<Json> events(const HttpResult& r) {
    std::vector<Json> out;
    const std::vector<std::string> data = r.sse_data();
    EXPECT_FALSE(data.empty());
    if (data.empty()) return out;
    EXPECT_EQ(data.back(), "[DONE]");
    for (size_t i = 0; i + 1 < data.size(); ++i) out.push_back(Json::parse(data[i]));
    return out;
  }
  size_t chat_prompt_tokens() {
    std::vector<ChatMessage> m = {{.role = "user", .content = "Hi"}};
    return h_.tokenizer().encode(*chatml(m, true), true, true).size();
  }
  ServerHarness h_;
};

TEST_F(GenerationHttpTest, ChatNonStreamedBody) {
  HttpResult r = post_json(h_.port(), "/v1/chat/completions", chat(), {"X-Request-Id: abc-123"});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_EQ(r.header("x-request-id"), "abc-123");
  Json j = r.json();
  EXPECT_EQ(j["id"], "chatcmpl-abc-123");
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_TRUE(j["created"].is_number_integer());
  EXPECT_EQ(j["model"], "test-model");
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], " Hello world!");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["usage"]["prompt_tokens"], chat_prompt_tokens());
  EXPECT_EQ(j["usage"]["completion_tokens"], 4);
  EXPECT_EQ(j["usage"]["total_tokens"], chat_prompt_tokens() + 4);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
  // The engine saw the ChatML prompt, tokenized with BOS, and the rest of the context as budget.
  std::vector<engine::GenerationRequest> reqs = h_.engine().submitted();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].prompt_tokens.size(), chat_prompt_tokens());
  EXPECT_EQ(reqs[0].prompt_tokens[0], kBos);
  EXPECT_EQ(reqs[0].max_tokens, 256 - static_cast<int32_t>(chat_prompt_tokens()));
}

TEST_F(GenerationHttpTest, SparseIsForwardedToTheEngine) {
  Json b = chat();
  b["sparse"] = {{"policy", "raas"}, {"budget", 512}};
  ASSERT_EQ(post_json(h_.port(), "/v1/chat/completions", b).status, 200);
  b["sparse"] = {{"policy", "h2o"}};
  ASSERT_EQ(post_json(h_.port(), "/v1/chat/completions", b).status, 200);
  ASSERT_EQ(post_json(h_.port(), "/v1/chat/completions", chat()).status, 200);
  const std::vector<engine::GenerationRequest> reqs = h_.engine().submitted();
  ASSERT_EQ(reqs.size(), 3u);
  ASSERT_TRUE(reqs[0].sparse.has_value());
  EXPECT_EQ(reqs[0].sparse->policy, "raas");
  EXPECT_EQ(reqs[0].sparse->budget, 512);
  ASSERT_TRUE(reqs[1].sparse.has_value());
  EXPECT_EQ(reqs[1].sparse->policy, "h2o");
  EXPECT_EQ(reqs[1].sparse->budget, 0);  // the engine's default
  EXPECT_FALSE(reqs[2].sparse.has_value());
}

TEST_F(GenerationHttpTest, GeneratesARequestIdWhenNoneIsGiven) {
  HttpResult a = post_json(h_.port(), "/v1/chat/completions", chat());
  HttpResult b = post_json(h_.port(), "/v1/chat/completions", chat());
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(a.header("x-request-id").size(), 32u);
  EXPECT_NE(a.header("x-request-id"), b.header("x-request-id"));
  EXPECT_EQ(a.json()["id"], "chatcmpl-" + a.header("x-request-id"));
}

TEST_F(GenerationHttpTest, ChatStreamWithUsage) {
  Json body = chat(true);
  body["stream_options"] = {{"include_usage", true}};
  HttpResult r = post_json(h_.port(), "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "text/event-stream");
  EXPECT_TRUE(r.chunked);
  EXPECT_EQ(r.body.find('\r'), std::string::npos);  // LF-only framing
  std::vector<Json> ev = events(r);
  ASSERT_GE(ev.size(), 4u);
  // First chunk: role only (content ""), sent with the first token.
  EXPECT_EQ(ev[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(ev[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(ev[0]["choices"][0]["delta"]["content"], "");
  std::string content;
  std::string id = ev[0]["id"];
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i]["id"], id);
    EXPECT_EQ(ev[i]["created"], ev[0]["created"]);
    ASSERT_TRUE(ev[i].contains("usage"));
    if (i + 1 < ev.size()) {
      EXPECT_TRUE(ev[i]["usage"].is_null());
      ASSERT_EQ(ev[i]["choices"].size(), 1u);
      if (ev[i]["choices"][0]["delta"].contains("content")) {
        content += ev[i]["choices"][0]["delta"]["content"].get<std::string>();
      }
    }
  }
  EXPECT_EQ(content, " Hello world!");
  const Json& finish = ev[ev.size() - 2];
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(finish["choices"][0]["delta"].empty());
  const Json& usage = ev.back();
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 4);
  EXPECT_EQ(usage["usage"]["prompt_tokens"], chat_prompt_tokens());
}

TEST_F(GenerationHttpTest, ChatStreamWithoutUsageHasNoUsage) {
  HttpResult r = post_json(h_.port(), "/v1/chat/completions", chat(true));
  ASSERT_EQ(r.status, 200);
  for (const Json& e : events(r)) {
    EXPECT_FALSE(e.contains("usage")) << e.dump();
    EXPECT_EQ(e["choices"].size(), 1u);
  }
}

TEST_F(GenerationHttpTest, CompletionsNonStreamedWithMultiplePromptsAndN) {
  Json body = {
      {"prompt", Json::array({"Once", "Twice"})}, {"n", 2}, {"seed", 7}, {"max_tokens", 3}};
  HttpResult r = post_json(h_.port(), "/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = r.json();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  ASSERT_EQ(j["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i);
    EXPECT_EQ(j["choices"][i]["text"], " Hello world!");
    EXPECT_EQ(j["choices"][i]["finish_reason"], "length");  // max_tokens 3 cut the script
  }
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  std::vector<engine::GenerationRequest> reqs = h_.engine().submitted();
  ASSERT_EQ(reqs.size(), 4u);
  std::multiset<uint64_t> seeds;
  for (const auto& q : reqs) {
    EXPECT_EQ(q.max_tokens, 3);
    seeds.insert(q.sampling.seed.value());
  }
  EXPECT_EQ(seeds, (std::multiset<uint64_t>{7, 8, 7, 8}));
  const size_t once = h_.tokenizer().encode("Once", true, true).size();
  const size_t twice = h_.tokenizer().encode("Twice", true, true).size();
  EXPECT_EQ(j["usage"]["prompt_tokens"], once + twice);
}

TEST_F(GenerationHttpTest, CompletionsStreamAndEcho) {
  Json body = {{"prompt", "Once"}, {"stream", true}, {"echo", true}};
  HttpResult r = post_json(h_.port(), "/v1/completions", body);
  ASSERT_EQ(r.status, 200);
  std::string text;
  std::vector<Json> ev = events(r);
  for (const Json& e : ev) {
    EXPECT_EQ(e["object"], "text_completion");
    ASSERT_EQ(e["choices"].size(), 1u);
    EXPECT_FALSE(e["choices"][0].contains("delta"));
    text += e["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, "Once Hello world!");
  EXPECT_EQ(ev.back()["choices"][0]["finish_reason"], "stop");

  body["stream"] = false;
  HttpResult plain = post_json(h_.port(), "/v1/completions", body);
  ASSERT_EQ(plain.status, 200);
  EXPECT_EQ(plain.json()["choices"][0]["text"], "Once Hello world!");
}

TEST_F(GenerationHttpTest, TokenIdPromptIsPassedThrough) {
  Json body = {{"prompt", Json::array({kBos, kHello, kWorld})}, {"max_tokens", 2}};
  HttpResult r = post_json(h_.port(), "/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(h_.engine().submitted().at(0).prompt_tokens,
            (std::vector<int32_t>{kBos, kHello, kWorld}));
  EXPECT_EQ(r.json()["usage"]["prompt_tokens"], 3);
}

TEST_F(GenerationHttpTest, ChatStreamWithNTwoInterleavesChoices) {
  h_.engine().set_script([](const engine::GenerationRequest&) {
    FakeScript s = hello_script();
    s.token_delay = 2ms;
    return s;
  });
  Json body = chat(true);
  body["n"] = 2;
  HttpResult r = post_json(h_.port(), "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200);
  std::map<int, std::string> content;
  std::map<int, int> role_seen_at, finish_seen;
  std::vector<Json> ev = events(r);
  for (size_t i = 0; i < ev.size(); ++i) {
    const Json& c = ev[i]["choices"][0];
    const int idx = c["index"];
    if (c["delta"].contains("role")) role_seen_at[idx] = static_cast<int>(i);
    if (c["delta"].contains("content")) {
      EXPECT_TRUE(role_seen_at.count(idx)) << "content before role for choice " << idx;
      content[idx] += c["delta"]["content"].get<std::string>();
    }
    if (!c["finish_reason"].is_null()) ++finish_seen[idx];
  }
  EXPECT_EQ(content[0], " Hello world!");
  EXPECT_EQ(content[1], " Hello world!");
  EXPECT_EQ(finish_seen[0], 1);
  EXPECT_EQ(finish_seen[1], 1);
}

TEST_F(GenerationHttpTest, StopStringAcrossTokensIsNeverEmittedAndTheEngineStops) {
  h_.engine().set_script([](const engine::GenerationRequest&) {
    FakeScript s;
    s.tokens = {kThe, kEnd, kSt, kOp, kMore, kMore, kMore};
    s.token_delay = 1ms;
    return s;
  });
  for (bool stream : {false, true}) {
    Json body = chat(stream);
    body["stop"] = Json::array({"STOP"});
    HttpResult r = post_json(h_.port(), "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.body.find("ST\""), std::string::npos);
    EXPECT_EQ(r.body.find("STOP\""), r.body.rfind("STOP\""));  // at most the stop_reason field
    EXPECT_EQ(r.body.find("more"), std::string::npos);
    std::string content, finish;
    if (stream) {
      for (const Json& e : events(r)) {
        const Json& c = e["choices"][0];
        if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
        if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
      }
    } else {
      Json j = r.json();
      content = j["choices"][0]["message"]["content"];
      finish = j["choices"][0]["finish_reason"];
      EXPECT_EQ(j["choices"][0]["stop_reason"], "STOP");
      EXPECT_EQ(j["usage"]["completion_tokens"], 4);
    }
    EXPECT_EQ(content, " The end") << "stream " << stream;
    EXPECT_EQ(finish, "stop");
    // The engine got the stop strings and finished the request itself: no abort (an abort would
    // count the completion as finished_reason="abort" in /metrics).
    EXPECT_EQ(h_.engine().submitted().back().stop_strings, std::vector<std::string>{"STOP"});
    EXPECT_TRUE(h_.engine().wait_for_idle(5s));
    EXPECT_EQ(h_.engine().abort_count(h_.engine().keys().back()), 0);
  }
}

TEST_F(GenerationHttpTest, ChatLogprobsShape) {
  Json body = chat();
  body["logprobs"] = true;
  body["top_logprobs"] = 2;
  HttpResult r = post_json(h_.port(), "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(h_.engine().submitted().at(0).sampling.logprobs, 2);
  const Json body_json = r.json();
  const Json& lp = body_json["choices"][0]["logprobs"];
  ASSERT_TRUE(lp["content"].is_array());
  ASSERT_EQ(lp["content"].size(), 4u);
  const Json& first = lp["content"][0];
  EXPECT_EQ(first["token"], " Hello");
  EXPECT_DOUBLE_EQ(first["logprob"].get<double>(), -0.125);
  EXPECT_EQ(first["bytes"], Json::array({32, 72, 101, 108, 108, 111}));
  ASSERT_EQ(first["top_logprobs"].size(), 2u);
  EXPECT_EQ(first["top_logprobs"][1]["token"], " world");
  EXPECT_TRUE(first["top_logprobs"][1]["bytes"].is_array());
  EXPECT_EQ(lp["content"][3]["token"], "</s>");

  body["stream"] = true;
  HttpResult s = post_json(h_.port(), "/v1/chat/completions", body);
  size_t entries = 0;
  for (const Json& e : events(s)) {
    const Json& c = e["choices"][0];
    if (!c["logprobs"].is_null()) entries += c["logprobs"]["content"].size();
  }
  EXPECT_EQ(entries, 4u);
}

TEST_F(GenerationHttpTest, CompletionLogprobsShape) {
  Json body = {{"prompt", "Once"}, {"logprobs", 1}, {"echo", true}};
  HttpResult r = post_json(h_.port(), "/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const Json body_json = r.json();
  const Json& lp = body_json["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 4u);
  ASSERT_EQ(lp["token_logprobs"].size(), 4u);
  ASSERT_EQ(lp["top_logprobs"].size(), 4u);
  ASSERT_EQ(lp["text_offset"].size(), 4u);
  EXPECT_EQ(lp["tokens"][1], " world");
  EXPECT_DOUBLE_EQ(lp["token_logprobs"][1].get<double>(), -0.25);
  EXPECT_TRUE(lp["top_logprobs"][1].is_object());
  EXPECT_TRUE(lp["top_logprobs"][1].contains(" world"));
  EXPECT_EQ(lp["text_offset"][0], 4);   // after the echoed "Once"
  EXPECT_EQ(lp["text_offset"][1], 10);  // after "Once Hello"
}

TEST_F(GenerationHttpTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  TestHttpClient c(h_.port());
  ASSERT_TRUE(c.connected());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.send("POST", "/v1/chat/completions", chat(i == 1).dump()));
    std::optional<HttpResult> r = c.read_response();
    ASSERT_TRUE(r.has_value()) << "request " << i;
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body.find("Hello world!") != std::string::npos || i == 1, true);
  }
  ASSERT_TRUE(c.send("GET", "/v1/models"));
  std::optional<HttpResult> m = c.read_response();
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->json()["data"][0]["id"], "test-model");
  EXPECT_EQ(h_.server().num_connections(), 1u);
}

TEST_F(GenerationHttpTest, EngineErrorMidStreamBecomesAnSseErrorThenDone) {
  h_.engine().set_script([](const engine::GenerationRequest&) {
    FakeScript s;
    s.tokens = {kHello};
    s.finish = engine::FinishReason::kError;
    s.error = "kv cache exploded";
    return s;
  });
  HttpResult r = post_json(h_.port(), "/v1/chat/completions", chat(true));
  ASSERT_EQ(r.status, 200);
  std::vector<std::string> data = r.sse_data();
  ASSERT_GE(data.size(), 2u);
  EXPECT_EQ(data.back(), "[DONE]");
  Json err = Json::parse(data[data.size() - 2]);
  ASSERT_TRUE(err.contains("error"));
  EXPECT_EQ(err["error"]["message"], "kv cache exploded");

  HttpResult plain = post_json(h_.port(), "/v1/chat/completions", chat());
  EXPECT_EQ(plain.status, 500);
  EXPECT_EQ(plain.json()["error"]["type"], "server_error");
}

TEST_F(GenerationHttpTest, ModelsRoutes) {
  HttpResult list = http_request(h_.port(), "GET", "/v1/models");
  ASSERT_EQ(list.status, 200);
  Json j = list.json();
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(j["data"][0]["owned_by"], "keel");
  EXPECT_EQ(j["data"][0]["max_model_len"], 256);
  HttpResult one = http_request(h_.port(), "GET", "/v1/models/test-model");
  ASSERT_EQ(one.status, 200);
  EXPECT_EQ(one.json()["id"], "test-model");
  HttpResult other = http_request(h_.port(), "GET", "/v1/models/gpt-4");
  EXPECT_EQ(other.status, 404);
  EXPECT_EQ(other.json()["error"]["code"], "model_not_found");
}

}  // namespace
}  // namespace keel::server::testing
