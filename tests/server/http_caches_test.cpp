// The context-cache endpoints over real HTTP against the fake engine: create from a prompt or
// from messages (the engine request pins with the cache id and ttl), get, list, delete (the
// engine is told to release), requests naming cache_id get the cache's tokens or messages in
// front of theirs and its salt; every error: unknown id, wrong endpoint for the cache, both or
// neither of messages/prompt, bad ttl, conflicting salt, wrong method, a full pin budget, an
// engine failure; a client gone while the KV is computed aborts the request and unpins it; expiry
// follows the engine's clock alone (the fake's manual one).
#include <gtest/gtest.h>

#include "server_harness.h"
#include "support/test_support.h"

namespace keel::server::testing {
namespace {

using Json = nlohmann::json;

class CachesHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    h_.engine().set_script([](const engine::GenerationRequest&) {
      FakeScript s;
      s.tokens = {kHello, kWorld};
      s.finish = engine::FinishReason::kLength;
      return s;
    });
  }
  Json create(const Json& body) {
    HttpResult r = post_json(h_.port(), "/v1/caches", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? r.json() : Json();
  }
  std::vector<int32_t> encode(const std::string& text, bool special) {
    return h_.tokenizer().encode(text, special, true);
  }
  ServerHarness h_;
};

TEST_F(CachesHttpTest, CreateGetListDelete) {
  const Json c = create({{"prompt", "Hello world"}, {"ttl", "600s"}, {"cache_salt", "s1"}});
  const std::string id = c["id"];
  EXPECT_TRUE(id.starts_with("cache-"));
  EXPECT_EQ(c["object"], "cache");
  EXPECT_EQ(c["source"], "prompt");
  EXPECT_EQ(c["ttl"], 600);
  EXPECT_EQ(c["expires_at"].get<int64_t>() - c["created"].get<int64_t>(), 600);
  EXPECT_EQ(c["num_tokens"], encode("Hello world", true).size());
  const std::vector<engine::GenerationRequest> reqs = h_.engine().submitted();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].retain_as, id);
  EXPECT_EQ(reqs[0].retain_ms, 600'000);
  EXPECT_EQ(reqs[0].max_tokens, 1);
  EXPECT_EQ(reqs[0].cache_salt, "s1");
  EXPECT_EQ(reqs[0].prompt_tokens, encode("Hello world", true));

  const std::vector<std::string> salt = {"X-Cache-Salt: s1"};
  HttpResult got = http_request(h_.port(), "GET", "/v1/caches/" + id, "", salt);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.json(), c);
  HttpResult list = http_request(h_.port(), "GET", "/v1/caches", "", salt);
  ASSERT_EQ(list.status, 200);
  ASSERT_EQ(list.json()["data"].size(), 1u);
  EXPECT_EQ(list.json()["data"][0]["id"], id);

  HttpResult del = http_request(h_.port(), "DELETE", "/v1/caches/" + id + "?cache_salt=s1");
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(del.json()["deleted"], true);
  EXPECT_EQ(h_.engine().released_caches(), std::vector<std::string>{id});
  HttpResult gone = http_request(h_.port(), "GET", "/v1/caches/" + id, "", salt);
  EXPECT_EQ(gone.status, 404);
  EXPECT_EQ(gone.json()["error"]["code"], "cache_not_found");
  EXPECT_EQ(http_request(h_.port(), "DELETE", "/v1/caches/" + id, "", salt).status, 404);
  EXPECT_TRUE(http_request(h_.port(), "GET", "/v1/caches", "", salt).json()["data"].empty());
}

TEST_F(CachesHttpTest, ACacheBelongsToItsSalt) {
  const std::string a = create({{"prompt", "Hello world"}, {"cache_salt", "tenant-a"}})["id"];
  const std::string open = create({{"prompt", "Hello"}})["id"];  // no salt: a tenant of its own
  const size_t submits = h_.engine().submitted().size();
  // Listed only to its own salt; the unsalted list shows only unsalted caches.
  const Json mine =
      http_request(h_.port(), "GET", "/v1/caches", "", {"X-Cache-Salt: tenant-a"}).json();
  ASSERT_EQ(mine["data"].size(), 1u);
  EXPECT_EQ(mine["data"][0]["id"], a);
  const Json anon = http_request(h_.port(), "GET", "/v1/caches").json();
  ASSERT_EQ(anon["data"].size(), 1u);
  EXPECT_EQ(anon["data"][0]["id"], open);
  EXPECT_TRUE(
      http_request(h_.port(), "GET", "/v1/caches?cache_salt=tenant-b").json()["data"].empty());
  // Another salt (or none) can neither read, use nor delete it: 404 as for an unknown id.
  for (const std::vector<std::string>& who :
       {std::vector<std::string>{}, std::vector<std::string>{"X-Cache-Salt: tenant-b"}}) {
    EXPECT_EQ(http_request(h_.port(), "GET", "/v1/caches/" + a, "", who).status, 404);
    EXPECT_EQ(http_request(h_.port(), "DELETE", "/v1/caches/" + a, "", who).status, 404);
  }
  for (const Json& body :
       {Json{{"prompt", " more"}, {"cache_id", a}},
        Json{{"prompt", " more"}, {"cache_id", a}, {"cache_salt", "tenant-b"}}}) {
    HttpResult r = post_json(h_.port(), "/v1/completions", body);
    EXPECT_EQ(r.status, 404) << r.body;
    EXPECT_EQ(r.json()["error"]["code"], "cache_not_found");
  }
  EXPECT_EQ(h_.engine().submitted().size(), submits);  // nothing reached the engine
  EXPECT_TRUE(h_.engine().released_caches().empty());
  // The owner still has it.
  EXPECT_EQ(
      http_request(h_.port(), "GET", "/v1/caches/" + a, "", {"X-Cache-Salt: tenant-a"}).status,
      200);
}

TEST_F(CachesHttpTest, CompletionsExtendAPromptCache) {
  const Json c = create({{"prompt", "Hello world"}, {"cache_salt", "s1"}});
  EXPECT_EQ(c["ttl"], 3600);  // the default
  HttpResult r = post_json(
      h_.port(), "/v1/completions",
      {{"prompt", " more"}, {"cache_id", c["id"]}, {"cache_salt", "s1"}, {"max_tokens", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<engine::GenerationRequest> reqs = h_.engine().submitted();
  ASSERT_EQ(reqs.size(), 2u);
  std::vector<int32_t> want = encode("Hello world", true);
  for (int32_t t : encode(" more", false)) want.push_back(t);
  EXPECT_EQ(reqs[1].prompt_tokens, want);  // one BOS, at the front
  EXPECT_EQ(reqs[1].cache_salt, "s1");
  EXPECT_TRUE(reqs[1].retain_as.empty());
  EXPECT_EQ(r.json()["usage"]["prompt_tokens"], want.size());
  // Token-id prompts are appended as given.
  r = post_json(h_.port(), "/v1/completions",
                {{"prompt", Json::array({kMore, kBang})},
                 {"cache_id", c["id"]},
                 {"cache_salt", "s1"},
                 {"max_tokens", 1}});
  ASSERT_EQ(r.status, 200) << r.body;
  want = encode("Hello world", true);
  want.push_back(kMore);
  want.push_back(kBang);
  EXPECT_EQ(h_.engine().submitted().back().prompt_tokens, want);
}

TEST_F(CachesHttpTest, ChatExtendsAMessagesCache) {
  const Json system = {{"role", "system"}, {"content", "Hello world"}};
  const Json c = create({{"messages", Json::array({system})}});
  EXPECT_EQ(c["source"], "messages");
  std::vector<ChatMessage> cached = {{.role = "system", .content = "Hello world"}};
  EXPECT_EQ(h_.engine().submitted()[0].prompt_tokens, encode(*chatml(cached, false), true));
  HttpResult r = post_json(h_.port(), "/v1/chat/completions",
                           {{"messages", Json::array({Json{{"role", "user"}, {"content", "Hi"}}})},
                            {"cache_id", c["id"]}});
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<ChatMessage> all = {{.role = "system", .content = "Hello world"},
                                  {.role = "user", .content = "Hi"}};
  EXPECT_EQ(h_.engine().submitted().back().prompt_tokens, encode(*chatml(all, true), true));
}

TEST_F(CachesHttpTest, PositionIndependentMarksDoNotApplyToACache) {
  const Json part = {{"type", "text"},
                     {"text", "Hello world"},
                     {"cache_control", {{"type", "position_independent"}}}};
  create({{"messages", Json::array({Json{{"role", "system"}, {"content", Json::array({part})}}})}});
  std::vector<ChatMessage> plain = {{.role = "system", .content = "Hello world"}};
  const engine::GenerationRequest req = h_.engine().submitted().at(0);
  EXPECT_EQ(req.prompt_tokens, encode(*chatml(plain, false), true));
  EXPECT_TRUE(req.pic_chunks.empty());
}

TEST_F(CachesHttpTest, Errors) {
  const Json prompt_cache = create({{"prompt", "Hello"}, {"cache_salt", "s1"}});
  const Json chat_body = {{"messages", Json::array({Json{{"role", "user"}, {"content", "Hi"}}})}};
  struct Case {
    std::string path;
    Json body;
    int status;
    std::string param;
  };
  Json unknown = chat_body;
  unknown["cache_id"] = "cache-nope";
  Json wrong_kind = chat_body;
  wrong_kind["cache_id"] = prompt_cache["id"];
  wrong_kind["cache_salt"] = "s1";
  const std::vector<Case> cases = {
      {"/v1/chat/completions", unknown, 404, "cache_id"},
      {"/v1/chat/completions", wrong_kind, 400, "cache_id"},
      {"/v1/completions",
       {{"prompt", "x"}, {"cache_id", prompt_cache["id"]}, {"cache_salt", "other"}},
       404,
       "cache_id"},
      {"/v1/completions", {{"prompt", "x"}, {"cache_id", ""}}, 400, "cache_id"},
      {"/v1/completions", {{"prompt", "x"}, {"cache_id", 7}}, 400, "cache_id"},
      {"/v1/caches", {{"prompt", "x"}, {"messages", chat_body["messages"]}}, 400, "messages"},
      {"/v1/caches", {{"ttl", 5}}, 400, "messages"},
      {"/v1/caches", {{"prompt", "x"}, {"ttl", 0}}, 400, "ttl"},
      {"/v1/caches", {{"prompt", "x"}, {"ttl", "soon"}}, 400, "ttl"},
      {"/v1/caches", {{"prompt", "x"}, {"ttl", 1e9}}, 400, "ttl"},
      {"/v1/caches", {{"prompt", "x"}, {"ttl", 1.5}}, 400, "ttl"},
      {"/v1/caches", {{"prompt", Json::array({"a", "b"})}}, 400, "prompt"},
      {"/v1/caches", {{"prompt", "x"}, {"model", "other"}}, 404, "model"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.dump());
    HttpResult r = post_json(h_.port(), c.path, c.body);
    EXPECT_EQ(r.status, c.status) << r.body;
    EXPECT_EQ(r.json()["error"]["param"], c.param);
  }
  EXPECT_EQ(http_request(h_.port(), "PUT", "/v1/caches").status, 405);
  EXPECT_EQ(http_request(h_.port(), "POST", "/v1/caches/x").status, 405);
  EXPECT_EQ(http_request(h_.port(), "POST", "/v1/caches", "{not json").status, 400);
  // The waiting queue is full: 429 (retry later). The pin quota is full: 400 with its own code,
  // since retrying cannot help. The engine fails the request: 500, no entry.
  h_.engine().set_queue_full(true);
  EXPECT_EQ(post_json(h_.port(), "/v1/caches", {{"prompt", "x"}}).status, 429);
  h_.engine().set_queue_full(false);
  h_.engine().set_cache_quota_full(true);
  HttpResult quota = post_json(h_.port(), "/v1/caches", {{"prompt", "x"}});
  EXPECT_EQ(quota.status, 400) << quota.body;
  EXPECT_EQ(quota.json()["error"]["code"], "cache_quota_exceeded");
  EXPECT_EQ(quota.header("retry-after"), "");
  h_.engine().set_cache_quota_full(false);
  h_.engine().set_script([](const engine::GenerationRequest&) {
    FakeScript s;
    s.finish = engine::FinishReason::kError;
    s.error = "boom";
    return s;
  });
  EXPECT_EQ(post_json(h_.port(), "/v1/caches", {{"prompt", "x"}}).status, 500);
  EXPECT_EQ(
      http_request(h_.port(), "GET", "/v1/caches", "", {"X-Cache-Salt: s1"}).json()["data"].size(),
      1u);
}

TEST_F(CachesHttpTest, ClientGoneWhileComputingAbortsAndUnpins) {
  h_.engine().set_script([](const engine::GenerationRequest&) {
    FakeScript s;
    s.stall = FakeScript::Stall::kPrefill;
    return s;
  });
  TestHttpClient client(h_.port());
  ASSERT_TRUE(client.send("POST", "/v1/caches", Json{{"prompt", "Hello world"}}.dump()));
  ASSERT_TRUE(h_.engine().wait_for_submits(1, std::chrono::seconds(5)));
  const engine::RequestKey key = h_.engine().keys().at(0);
  client.close();
  EXPECT_TRUE(h_.engine().wait_for_aborted(key, std::chrono::seconds(5)));
  // Whatever the request pinned before the abort reached it is released.
  EXPECT_TRUE(keel::testing::eventually([&] {
    const auto calls = h_.engine().release_calls();
    return calls.size() == 1 && calls[0] == h_.engine().submitted()[0].retain_as;
  }));
  EXPECT_TRUE(http_request(h_.port(), "GET", "/v1/caches").json()["data"].empty());
}

TEST_F(CachesHttpTest, ExpiryIsTheEnginesOnClock) {
  // The server keeps no registry and no clock: a cache lives exactly as long as the engine (here
  // the fake's manual clock) says, for GET, the list, DELETE and generation requests alike.
  const std::string id = create({{"prompt", "Hello world"}, {"ttl", 600}})["id"];
  const std::string later = create({{"prompt", "Hello"}, {"ttl", 900}})["id"];
  h_.engine().advance_cache_clock(std::chrono::seconds(599));
  EXPECT_EQ(http_request(h_.port(), "GET", "/v1/caches/" + id).status, 200);
  EXPECT_EQ(post_json(h_.port(), "/v1/completions", {{"prompt", " more"}, {"cache_id", id}}).status,
            200);
  h_.engine().advance_cache_clock(std::chrono::seconds(1));  // its deadline
  HttpResult gone = http_request(h_.port(), "GET", "/v1/caches/" + id);
  EXPECT_EQ(gone.status, 404);
  EXPECT_EQ(gone.json()["error"]["code"], "cache_not_found");
  HttpResult use = post_json(h_.port(), "/v1/completions", {{"prompt", " more"}, {"cache_id", id}});
  EXPECT_EQ(use.status, 404) << use.body;
  EXPECT_EQ(http_request(h_.port(), "DELETE", "/v1/caches/" + id).status, 404);
  const Json list = http_request(h_.port(), "GET", "/v1/caches").json();
  ASSERT_EQ(list["data"].size(), 1u);
  EXPECT_EQ(list["data"][0]["id"], later);
  h_.engine().advance_cache_clock(std::chrono::seconds(300));
  EXPECT_TRUE(http_request(h_.port(), "GET", "/v1/caches").json()["data"].empty());
}

}  // namespace
}  // namespace keel::server::testing
