// End-to-end tests of `keel serve` over real HTTP on 127.0.0.1: the OpenAI endpoints, streaming,
// n > 1, stop strings (counted as stops in /metrics), logprobs, usage, every error code,
// disconnects in each request state, concurrent greedy streams equal to one-at-a-time results,
// schedule-ahead on/off equality, and prefix-cache hits in /metrics. Model: stories260K
// (../shared).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;

const std::string kStories = "models/stories260K/stories260K.gguf";

std::string stories() { return shared_path(kStories); }

// A metric's value from /metrics (first sample named `name` whose labels contain `label`).
double metric(int port, const std::string& name, const std::string& label = "") {
  return metric_value(http_request(port, "GET", "/metrics").body, name, label);
}

using keel::testing::eventually;

json completion(int port, json body) {
  const HttpResponse r = http_request(port, "POST", "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return json::parse(r.body, nullptr, false);
}

class StoriesServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!have_shared()) return;
    server_ = new ServeProcess({"-m", stories(), "-t", "1", "--served-model-name", "stories",
                                "--max-num-seqs", "8", "--max-waiting", "64"});
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    KEEL_REQUIRE_SHARED();
    ASSERT_TRUE(server_->ok()) << server_->error();
  }
  static int port() { return server_->port(); }
  static ServeProcess* server_;
};
ServeProcess* StoriesServer::server_ = nullptr;

TEST_F(StoriesServer, CompletionMatchesLlamaCppGreedy) {
  const auto ref =
      json::parse(read_file(shared_path("models/stories260K/reference/greedy.json")))["results"][0];
  const json body = completion(port(), {{"model", "stories"},
                                        {"prompt", "Once upon a time"},
                                        {"max_tokens", 64},
                                        {"temperature", 0},
                                        {"ignore_eos", true}});
  ASSERT_TRUE(body.is_object());
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], "stories");
  EXPECT_EQ(body["choices"][0]["text"], ref["gen_text"]);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(body["usage"]["completion_tokens"], 64);
  EXPECT_EQ(body["usage"]["total_tokens"], 69);
}

TEST_F(StoriesServer, ContinuationKeepsItsLeadingSpace) {
  // llama.cpp (and vLLM) return " went to the park ...": the completion continues the prompt, so
  // its first SentencePiece space is kept; only a text's very first piece drops it.
  const auto ref =
      json::parse(read_file(shared_path("models/stories260K/reference/greedy.json")))["results"][3];
  ASSERT_EQ(ref["prompt"], "One day, a boy named Tim");
  const std::string want = ref["gen_text"];
  ASSERT_EQ(want.rfind(" went", 0), 0u);
  const json req = {
      {"prompt", ref["prompt"]}, {"max_tokens", 64}, {"temperature", 0}, {"ignore_eos", true}};
  EXPECT_EQ(completion(port(), req)["choices"][0]["text"], want);
  json echo = req;
  echo["echo"] = true;
  EXPECT_EQ(completion(port(), echo)["choices"][0]["text"],
            ref["prompt"].get<std::string>() + want);
  json streamed = req;
  streamed["stream"] = true;
  const HttpResponse r = http_request(port(), "POST", "/v1/completions", streamed.dump());
  ASSERT_EQ(r.status, 200);
  std::string text;
  for (const std::string& e : sse_events(r.body)) {
    if (e != "[DONE]") text += json::parse(e)["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, want);
}

TEST_F(StoriesServer, ChatNonStreamedAndStreamedAgree) {
  const json req = {{"model", "stories"},
                    {"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}},
                    {"max_tokens", 24},
                    {"temperature", 0}};
  const HttpResponse plain = http_request(port(), "POST", "/v1/chat/completions", req.dump());
  ASSERT_EQ(plain.status, 200) << plain.body;
  const json p = json::parse(plain.body);
  EXPECT_EQ(p["object"], "chat.completion");
  EXPECT_EQ(p["choices"][0]["message"]["role"], "assistant");
  const std::string text = p["choices"][0]["message"]["content"];

  json sreq = req;
  sreq["stream"] = true;
  const HttpResponse streamed = http_request(port(), "POST", "/v1/chat/completions", sreq.dump());
  ASSERT_EQ(streamed.status, 200);
  EXPECT_NE(streamed.headers.at("content-type").find("text/event-stream"), std::string::npos);
  const auto events = sse_events(streamed.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string joined;
  std::string finish;
  bool saw_role = false;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json e = json::parse(events[i]);
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    EXPECT_FALSE(e.contains("usage") && !e["usage"].is_null()) << "usage only when asked";
    const json& c = e["choices"][0];
    if (c["delta"].contains("role")) saw_role = true;
    if (c["delta"].contains("content")) joined += c["delta"]["content"].get<std::string>();
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_TRUE(saw_role);
  EXPECT_EQ(joined, text);
  EXPECT_EQ(finish, p["choices"][0]["finish_reason"]);
}

TEST_F(StoriesServer, IncludeUsageAddsFinalUsageChunk) {
  const json req = {{"prompt", "The little dog"},
                    {"max_tokens", 8},
                    {"temperature", 0},
                    {"ignore_eos", true},
                    {"stream", true},
                    {"stream_options", {{"include_usage", true}}}};
  const HttpResponse r = http_request(port(), "POST", "/v1/completions", req.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const auto events = sse_events(r.body);
  ASSERT_GE(events.size(), 3u);
  const json usage = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 8);
  const json tok = json::parse(
      http_request(port(), "POST", "/tokenize", R"({"prompt": "The little dog"})").body);
  EXPECT_EQ(usage["usage"]["prompt_tokens"], tok["tokens"].size());
  EXPECT_EQ(usage["usage"]["total_tokens"], tok["tokens"].size() + 8);
}

TEST_F(StoriesServer, TwoChoicesWithSeedsAreReproducible) {
  const json req = {{"prompt", "Lily and Tom went to the park"},
                    {"max_tokens", 16},
                    {"temperature", 1.0},
                    {"seed", 11},
                    {"n", 2}};
  const json a = completion(port(), req), b = completion(port(), req);
  ASSERT_EQ(a["choices"].size(), 2u);
  EXPECT_EQ(a["choices"][0]["index"], 0);
  EXPECT_EQ(a["choices"][1]["index"], 1);
  EXPECT_EQ(a["choices"], b["choices"]);
  EXPECT_NE(a["choices"][0]["text"], a["choices"][1]["text"]);
}

TEST_F(StoriesServer, StopStringIsNeverEmittedAndCountsAsStop) {
  // Greedy "Once upon a time" continues ", there was a little girl named Lily." — stop inside it,
  // across the " girl" | " named" token boundary. The engine finishes the request on the stop
  // string, so /metrics counts it as a stop (it used to be an abort by the server).
  const auto finished = [](const char* reason) {
    return metric(port(), "keel:request_success_total",
                  std::string("finished_reason=\"") + reason + "\"");
  };
  const double stops_before = finished("stop"), aborts_before = finished("abort");
  const json req = {{"prompt", "Once upon a time"},
                    {"max_tokens", 40},
                    {"temperature", 0},
                    {"stop", {"girl named"}}};
  const json body = completion(port(), req);
  EXPECT_EQ(body["choices"][0]["text"], ", there was a little ");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["choices"][0]["stop_reason"], "girl named");
  json sreq = req;
  sreq["stream"] = true;
  const HttpResponse r = http_request(port(), "POST", "/v1/completions", sreq.dump());
  std::string joined;
  for (const auto& e : sse_events(r.body)) {
    if (e == "[DONE]") break;
    const json j = json::parse(e);
    if (!j["choices"].empty()) joined += j["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(joined, ", there was a little ");
  EXPECT_TRUE(eventually([&] { return finished("stop") == stops_before + 2; }));
  EXPECT_EQ(finished("abort"), aborts_before);
}

TEST_F(StoriesServer, LogprobsHaveTheOpenAiShape) {
  const json chat =
      json::parse(http_request(port(), "POST", "/v1/chat/completions",
                               json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                    {"max_tokens", 4},
                                    {"temperature", 0},
                                    {"logprobs", true},
                                    {"top_logprobs", 3}}
                                   .dump())
                      .body);
  const json& content = chat["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), chat["usage"]["completion_tokens"].get<size_t>());
  for (const json& t : content) {
    EXPECT_LE(t["logprob"].get<double>(), 0.0);
    ASSERT_EQ(t["top_logprobs"].size(), 3u);
    // Greedy: the chosen token is the most likely one.
    EXPECT_EQ(t["top_logprobs"][0]["token"], t["token"]);
  }
  const json comp = completion(
      port(),
      {{"prompt", "The little dog"}, {"max_tokens", 3}, {"temperature", 0}, {"logprobs", 2}});
  const json& lp = comp["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"].size(), 3u);
  EXPECT_EQ(lp["token_logprobs"].size(), 3u);
  EXPECT_EQ(lp["top_logprobs"].size(), 3u);
  EXPECT_EQ(lp["text_offset"].size(), 3u);
}

TEST_F(StoriesServer, ErrorsAreOpenAiErrorObjects) {
  auto expect_error = [&](const std::string& path, const std::string& body, int status,
                          const std::string& method = "POST") {
    const HttpResponse r = http_request(port(), method, path, body);
    EXPECT_EQ(r.status, status) << path << " " << body << " → " << r.body;
    const json j = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
    EXPECT_TRUE(j["error"]["message"].is_string());
    EXPECT_TRUE(j["error"].contains("type"));
    EXPECT_TRUE(j["error"].contains("param"));
    EXPECT_TRUE(j["error"].contains("code"));
  };
  expect_error("/v1/completions", "{not json", 400);
  expect_error("/v1/completions", R"({"prompt": 5})", 400);
  expect_error("/v1/completions", R"({"prompt": "x", "temperature": 3})", 400);
  expect_error("/v1/completions", R"({"prompt": "x", "max_tokens": "many"})", 400);
  expect_error("/v1/chat/completions", R"({"messages": "hi"})", 400);
  std::string long_prompt;
  for (int i = 0; i < 300; ++i) long_prompt += "Once upon a time ";
  expect_error("/v1/completions", json{{"prompt", long_prompt}, {"max_tokens", 16}}.dump(), 400);
  expect_error("/v1/completions", R"({"prompt": "x", "model": "gpt-9"})", 404);
  expect_error("/v1/nothing", "{}", 404);
  expect_error("/v1/models", "", 405, "DELETE");
  // The server is still fine afterwards.
  EXPECT_EQ(completion(port(), {{"prompt", "x"}, {"max_tokens", 1}})["object"], "text_completion");
}

TEST_F(StoriesServer, ModelsHealthTokenize) {
  const json models = json::parse(http_request(port(), "GET", "/v1/models").body);
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "stories");
  EXPECT_EQ(http_request(port(), "GET", "/health").status, 200);
  const json tok =
      json::parse(http_request(port(), "POST", "/tokenize", R"({"prompt": "Hello world"})").body);
  EXPECT_EQ(tok["tokens"], json::parse("[1, 346, 306, 414, 263, 304, 341]"));
  const json detok = json::parse(
      http_request(port(), "POST", "/detokenize", R"({"tokens": [346, 306, 414, 263, 304, 341]})")
          .body);
  // Like SentencePiece and llama.cpp, decoding drops the leading space of the first word.
  EXPECT_EQ(detok["prompt"], "Hello world");
}

TEST_F(StoriesServer, ConcurrentGreedyStreamsEqualOneAtATime) {
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog",
                                            "Lily and Tom went to the park",
                                            "One day, a boy named Tim"};
  auto req = [](const std::string& p) {
    return json{{"prompt", p}, {"max_tokens", 32}, {"temperature", 0}, {"ignore_eos", true}};
  };
  std::vector<std::string> alone;
  for (const auto& p : prompts) alone.push_back(completion(port(), req(p))["choices"][0]["text"]);
  std::vector<std::string> together(32);
  std::vector<std::thread> threads;
  for (int i = 0; i < 32; ++i) {
    threads.emplace_back([&, i] {
      json r = req(prompts[static_cast<size_t>(i) % prompts.size()]);
      r["stream"] = true;
      const HttpResponse resp = http_request(port(), "POST", "/v1/completions", r.dump());
      for (const auto& e : sse_events(resp.body)) {
        if (e == "[DONE]") break;
        const json j = json::parse(e);
        if (!j["choices"].empty()) together[static_cast<size_t>(i)] += j["choices"][0]["text"];
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < together.size(); ++i) {
    EXPECT_EQ(together[i], alone[i % prompts.size()]) << "stream " << i;
  }
}

TEST_F(StoriesServer, PrefixCacheHitShowsInMetrics) {
  std::string system;
  for (int i = 0; i < 12; ++i) system += "Once upon a time there was a little girl. ";
  const double hits_before = metric(port(), "keel:prefix_cache_hits_total");
  completion(port(), {{"prompt", system + "She liked"}, {"max_tokens", 2}});
  const json second = completion(port(), {{"prompt", system + "He saw"}, {"max_tokens", 2}});
  EXPECT_GT(second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
  const double hits_after = metric(port(), "keel:prefix_cache_hits_total");
  EXPECT_GT(hits_after, hits_before);
}

TEST_F(StoriesServer, ContextCacheByIdIsReusedThenDeleted) {
  std::string context;
  for (int i = 0; i < 8; ++i) context += "Lily and Ben went to the park to play with a red ball. ";
  const HttpResponse made =
      http_request(port(), "POST", "/v1/caches", json{{"prompt", context}, {"ttl", 120}}.dump());
  ASSERT_EQ(made.status, 200) << made.body;
  const json cache = json::parse(made.body);
  const std::string id = cache["id"];
  EXPECT_GT(cache["num_tokens"].get<int>(), 64);
  EXPECT_TRUE(eventually([&] {  // engine stats are published just after the request finishes
    return metric(port(), "keel:context_caches") == 1 &&
           metric(port(), "keel:context_cache_blocks") > 0;
  }));
  // The same tokens sent in full: the cached context's, then the question's without a BOS.
  auto tokenize = [&](const json& body) {
    return json::parse(http_request(port(), "POST", "/tokenize", body.dump()).body)["tokens"];
  };
  json ids = tokenize({{"prompt", context}});
  for (const json& t : tokenize({{"prompt", " Then"}, {"add_special_tokens", false}})) {
    ids.push_back(t);
  }
  const json full = completion(port(), {{"prompt", ids}, {"max_tokens", 6}, {"temperature", 0}});
  const json via = completion(
      port(), {{"prompt", " Then"}, {"cache_id", id}, {"max_tokens", 6}, {"temperature", 0}});
  EXPECT_EQ(via["choices"][0]["text"], full["choices"][0]["text"]);
  EXPECT_GE(via["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(),
            cache["num_tokens"].get<int>() / 16 * 16);
  EXPECT_EQ(http_request(port(), "DELETE", "/v1/caches/" + id).status, 200);
  EXPECT_TRUE(eventually([&] { return metric(port(), "keel:context_caches") == 0; }));
  const HttpResponse gone = http_request(port(), "POST", "/v1/completions",
                                         json{{"prompt", "x"}, {"cache_id", id}}.dump());
  EXPECT_EQ(gone.status, 404) << gone.body;
}

TEST_F(StoriesServer, PositionIndependentChunksAreLinked) {
  const std::vector<std::string> docs = {
      "Lily went to the park. She saw a big red ball and played with it all day long.",
      "Tom had a little dog. The dog liked to run and jump in the garden with Tom.",
      "Sue found a shiny box under the tree. Inside the box there was a small toy car."};
  auto chat = [&](const std::vector<int>& order, const std::string& link, const std::string& salt) {
    json parts = json::array();
    for (int i : order) {
      parts.push_back({{"type", "text"},
                       {"text", docs[static_cast<size_t>(i)]},
                       {"cache_control", {{"type", "position_independent"}}}});
    }
    const json body = {
        {"messages", json::array({json{{"role", "system"}, {"content", parts}},
                                  json{{"role", "user"}, {"content", "Who had a dog?"}}})},
        {"max_tokens", 8},
        {"temperature", 0},
        {"pic_link", link},
        {"cache_salt", salt}};
    const HttpResponse r = http_request(port(), "POST", "/v1/chat/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body, nullptr, false);
  };
  // LegoLink recomputing whole chunks gives full recompute's output (separate salts: no prefix
  // hits between the runs).
  const json full = chat({0, 1, 2}, "full", "a");
  const json lego = chat({0, 1, 2}, "legolink-4096", "b");
  EXPECT_EQ(lego["choices"][0]["message"]["content"], full["choices"][0]["message"]["content"]);
  // Naive: the chunks are linked (other orders reuse the compiled chunks).
  const double linked = metric(port(), "keel:pic_tokens_linked_total");
  const json naive = chat({2, 0, 1}, "naive", "c");
  EXPECT_GT(naive["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 40);
  EXPECT_GT(metric(port(), "keel:pic_tokens_linked_total"), linked + 40);
  EXPECT_GE(metric(port(), "keel:pic_requests_total"), 2);
}

TEST(SparseServer, RaasByDefaultGivesPagesBackAndRequestsMayOptOut) {
  KEEL_REQUIRE_SHARED();
  ServeProcess server({"-m", stories(), "-t", "1", "--block-size", "8", "--sparse-policy", "raas",
                       "--sparse-budget", "32"});
  ASSERT_TRUE(server.ok()) << server.error();
  // A request that asks for dense decoding is not sparse and gives nothing back.
  const json dense = completion(server.port(), {{"prompt", "Once upon a time"},
                                                {"max_tokens", 100},
                                                {"ignore_eos", true},
                                                {"sparse", {{"policy", "dense"}}}});
  ASSERT_TRUE(dense.is_object());
  EXPECT_EQ(metric(server.port(), "keel:sparse_requests_total"), 0);
  EXPECT_EQ(metric(server.port(), "keel:sparse_pages_released_total"), 0);
  // The server's default (RaaS, L = 32) holds at most its prefill page + 4 + 1.
  const json body = completion(server.port(), {{"prompt", "Once upon a time"},
                                               {"max_tokens", 300},
                                               {"temperature", 0},
                                               {"ignore_eos", true}});
  ASSERT_TRUE(body.is_object());
  EXPECT_EQ(body["usage"]["completion_tokens"], 300);
  EXPECT_EQ(metric(server.port(), "keel:sparse_requests_total"), 1);
  EXPECT_GT(metric(server.port(), "keel:sparse_pages_released_total"), 30);  // ~38 pages written
  EXPECT_LE(metric(server.port(), "keel:sparse_max_pages_held"), 1 + 32 / 8 + 1);
  // A budget below one KV block is a 400.
  const HttpResponse bad =
      http_request(server.port(), "POST", "/v1/completions",
                   json{{"prompt", "x"}, {"sparse", {{"policy", "quest"}, {"budget", 4}}}}.dump());
  EXPECT_EQ(bad.status, 400) << bad.body;
}

// `keel serve --speculative ngram`: the OpenAI path answers with llama.cpp's greedy text, drafts
// are accepted (/metrics), a request may opt out, and bad parameters are 400s naming the field.
TEST(SpeculativeServer, NgramGivesTheGreedyTextAndCountsAcceptedDrafts) {
  KEEL_REQUIRE_SHARED();
  ServeProcess server({"-m", stories(), "-t", "1", "--speculative", "ngram", "--spec-k", "4"});
  ASSERT_TRUE(server.ok()) << server.error();
  const auto ref =
      json::parse(read_file(shared_path("models/stories260K/reference/greedy.json")))["results"][0];
  const json body = completion(server.port(), {{"prompt", "Once upon a time"},
                                               {"max_tokens", 64},
                                               {"temperature", 0},
                                               {"ignore_eos", true}});
  ASSERT_TRUE(body.is_object());
  EXPECT_EQ(body["choices"][0]["text"], ref["gen_text"]);
  EXPECT_EQ(body["usage"]["completion_tokens"], 64);
  EXPECT_GT(metric(server.port(), "keel:spec_accepted_tokens_total"), 0);
  EXPECT_GT(metric(server.port(), "keel:spec_tokens_per_step"), 1.0);
  const double steps = metric(server.port(), "keel:spec_verify_steps_total");
  const json off = completion(server.port(), {{"prompt", "Once upon a time"},
                                              {"max_tokens", 64},
                                              {"temperature", 0},
                                              {"ignore_eos", true},
                                              {"speculative", {{"method", "none"}}}});
  ASSERT_TRUE(off.is_object());
  EXPECT_EQ(off["choices"][0]["text"], ref["gen_text"]);
  EXPECT_EQ(metric(server.port(), "keel:spec_verify_steps_total"), steps);
  const HttpResponse bad =
      http_request(server.port(), "POST", "/v1/completions",
                   json{{"prompt", "x"}, {"speculative", {{"method", "ngram"}, {"k", 99}}}}.dump());
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(json::parse(bad.body)["error"]["param"], "speculative.k") << bad.body;
}

// `keel serve --draft-model FILE` alone turns draft-model speculation on (as llama.cpp's -md):
// stories260K drafting for itself gives llama.cpp's greedy text with every draft accepted.
TEST(SpeculativeServer, DraftModelFlagAloneSpeculatesWithTheDraftModel) {
  KEEL_REQUIRE_SHARED();
  ServeProcess server({"-m", stories(), "-t", "1", "--draft-model", stories()});
  ASSERT_TRUE(server.ok()) << server.error();
  const auto ref =
      json::parse(read_file(shared_path("models/stories260K/reference/greedy.json")))["results"][0];
  const json body = completion(server.port(), {{"prompt", "Once upon a time"},
                                               {"max_tokens", 64},
                                               {"temperature", 0},
                                               {"ignore_eos", true}});
  ASSERT_TRUE(body.is_object());
  EXPECT_EQ(body["choices"][0]["text"], ref["gen_text"]);
  EXPECT_GT(metric(server.port(), "keel:spec_accepted_tokens_total"), 0);
  EXPECT_GT(metric(server.port(), "keel:spec_tokens_per_step"), 3.0);
}

}  // namespace
}  // namespace keel::testing
