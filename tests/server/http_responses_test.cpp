// /v1/responses over real HTTP against the fake engine (the harness's ChatML formatter and
// keel's generic tool convention): the Response object, retrieve / delete / input_items paging,
// a previous_response_id chain and a function_call → function_call_output round trip whose
// prompts equal those of resending the whole history, the streamed events, background runs
// (completed, and cancelled while decoding: the engine request aborted), and the errors (a
// built-in tool, an unknown previous response or id, cancelling a foreground response), and a
// chain continued after a restart on the same state directory.
#include <gtest/gtest.h>

#include "server_harness.h"
#include "support/test_support.h"

namespace keel::server::testing {
namespace {

using Json = nlohmann::json;

std::vector<int32_t> bytes_of(std::string_view text) {
  std::vector<int32_t> out;
  for (char c : text) out.push_back(byte_token(static_cast<uint8_t>(c)));
  return out;
}

const char* kAddTool = R"({"type": "function", "name": "add", "parameters": {"type": "object",
  "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}})";

class ResponsesHttpTest : public ::testing::Test {
 protected:
  ResponsesHttpTest() : h_(test_config(), /*max_model_len=*/4096) { script("Hi there"); }
  void script(std::string_view text, FakeScript::Stall stall = FakeScript::Stall::kNone) {
    FakeScript s;
    s.tokens = bytes_of(text);
    s.tokens.push_back(kEos);
    s.stall = stall;
    h_.engine().set_script([s](const engine::GenerationRequest&) { return s; });
  }
  HttpResult create(const Json& body) { return post_json(h_.port(), "/v1/responses", body); }
  HttpResult get(const std::string& path) { return http_request(h_.port(), "GET", path); }
  // The prompt tokens of the engine's n-th request.
  std::vector<int32_t> prompt(size_t n) { return h_.engine().submitted().at(n).prompt_tokens; }

  ServerHarness h_;
};

TEST_F(ResponsesHttpTest, CreateRetrieveDeleteAndInputItems) {
  HttpResult r = create({{"model", "test-model"},
                         {"instructions", "Be brief."},
                         {"metadata", {{"k", "v"}}},
                         {"input", Json::parse(R"([{"role": "user", "content": "one"},
                           {"role": "assistant", "content": "two"},
                           {"role": "user", "content": [{"type": "input_text", "text": "three"}]}])")}});
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = r.json();
  const std::string id = j["id"];
  EXPECT_TRUE(id.starts_with("resp_"));
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(j["status"], "completed");
  EXPECT_EQ(j["model"], "test-model");
  EXPECT_EQ(j["instructions"], "Be brief.");
  EXPECT_EQ(j["metadata"]["k"], "v");
  EXPECT_EQ(j["store"], true);
  ASSERT_EQ(j["output"].size(), 1u);
  EXPECT_EQ(j["output"][0]["type"], "message");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "Hi there");
  EXPECT_EQ(j["usage"]["input_tokens"], prompt(0).size());
  EXPECT_EQ(j["usage"]["output_tokens"], 9);  // 8 bytes + EOS
  EXPECT_EQ(j["usage"]["total_tokens"],
            j["usage"]["input_tokens"].get<int>() + j["usage"]["output_tokens"].get<int>());
  EXPECT_TRUE(j["usage"]["input_tokens_details"].contains("cached_tokens"));
  const Json got = get("/v1/responses/" + id).json();
  EXPECT_EQ(got, j);

  Json items = get("/v1/responses/" + id + "/input_items").json();
  EXPECT_EQ(items["object"], "list");
  ASSERT_EQ(items["data"].size(), 3u);
  EXPECT_EQ(items["data"][0]["content"][0]["text"], "three");  // desc by default
  items = get("/v1/responses/" + id + "/input_items?order=asc&limit=2").json();
  ASSERT_EQ(items["data"].size(), 2u);
  EXPECT_EQ(items["data"][0]["content"][0]["text"], "one");
  EXPECT_TRUE(items["has_more"]);
  const std::string after = items["last_id"];
  items = get("/v1/responses/" + id + "/input_items?order=asc&after=" + after).json();
  ASSERT_EQ(items["data"].size(), 1u);
  EXPECT_EQ(items["data"][0]["content"][0]["text"], "three");
  EXPECT_FALSE(items["has_more"]);
  EXPECT_EQ(get("/v1/responses/" + id + "/input_items?limit=0").status, 400);

  HttpResult del = http_request(h_.port(), "DELETE", "/v1/responses/" + id);
  ASSERT_EQ(del.status, 200);
  EXPECT_EQ(del.json(), Json({{"id", id}, {"object", "response"}, {"deleted", true}}));
  EXPECT_EQ(get("/v1/responses/" + id).status, 404);
  EXPECT_EQ(http_request(h_.port(), "DELETE", "/v1/responses/" + id).status, 404);
  EXPECT_EQ(get("/v1/responses/" + id + "/input_items").status, 404);
}

TEST_F(ResponsesHttpTest, AChainPromptsAsResendingTheHistory) {
  const Json t1 = create({{"input", "Tell me a story."}, {"instructions", "Be brief."}}).json();
  const Json t2 = create({{"input", "And then?"},
                          {"previous_response_id", t1["id"]},
                          {"instructions", "Be brief."}})
                      .json();
  ASSERT_EQ(t2["status"], "completed") << t2;
  EXPECT_EQ(t2["previous_response_id"], t1["id"]);
  Json history = Json::array();
  history.push_back({{"role", "user"}, {"content", "Tell me a story."}});
  for (const Json& item : t1["output"]) history.push_back(item);
  history.push_back({{"role", "user"}, {"content", "And then?"}});
  const Json full = create({{"input", history}, {"instructions", "Be brief."}}).json();
  EXPECT_EQ(prompt(1), prompt(2));
  EXPECT_EQ(t2["usage"]["input_tokens"], full["usage"]["input_tokens"]);
  // The chain's prompt holds the first turn's prompt text and answer.
  EXPECT_GT(prompt(1).size(), prompt(0).size());
  // Instructions are not carried over: without them the chain's prompt is shorter.
  const Json bare = create({{"input", "And then?"}, {"previous_response_id", t1["id"]}}).json();
  EXPECT_LT(bare["usage"]["input_tokens"], t2["usage"]["input_tokens"]);
}

TEST_F(ResponsesHttpTest, FunctionCallRoundTrip) {
  script(R"({"name": "add", "arguments": {"a": 1, "b": 2}})");
  const Json tools = Json::array({Json::parse(kAddTool)});
  const Json t1 =
      create({{"input", "What is 1+2?"}, {"tools", tools}, {"tool_choice", "required"}}).json();
  ASSERT_EQ(t1["status"], "completed") << t1;
  ASSERT_EQ(t1["output"].size(), 1u) << t1;
  const Json call = t1["output"][0];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "add");
  EXPECT_EQ(Json::parse(call["arguments"].get<std::string>()), Json({{"a", 1}, {"b", 2}}));
  EXPECT_TRUE(call["call_id"].get<std::string>().starts_with("call_"));
  EXPECT_FALSE(h_.engine().submitted().at(0).grammar.empty());  // the forced call's grammar

  script("It is 3.");
  const Json output = {
      {"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "3"}};
  const Json t2 =
      create(
          {{"input", Json::array({output})}, {"previous_response_id", t1["id"]}, {"tools", tools}})
          .json();
  ASSERT_EQ(t2["status"], "completed") << t2;
  EXPECT_EQ(t2["output"][0]["content"][0]["text"], "It is 3.");
  const Json full =
      create({{"input",
               Json::array({Json{{"role", "user"}, {"content", "What is 1+2?"}}, call, output})},
              {"tools", tools}})
          .json();
  EXPECT_EQ(prompt(1), prompt(2));
  EXPECT_EQ(t2["usage"]["input_tokens"], full["usage"]["input_tokens"]);
}

TEST_F(ResponsesHttpTest, StreamsTheResponsesEvents) {
  HttpResult r = create({{"input", "Hi"}, {"stream", true}});
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.header("content-type").find("text/event-stream"), std::string::npos);
  std::vector<Json> events;
  for (const std::string& d : r.sse_data()) events.push_back(Json::parse(d));
  ASSERT_GE(events.size(), 8u);
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i]["sequence_number"], i);
  EXPECT_EQ(events.front()["type"], "response.created");
  EXPECT_EQ(events[1]["type"], "response.in_progress");
  EXPECT_EQ(events.back()["type"], "response.completed");
  std::string text;
  for (const Json& e : events) {
    if (e["type"] == "response.output_text.delta") text += e["delta"].get<std::string>();
  }
  EXPECT_EQ(text, "Hi there");
  const Json done = events.back()["response"];
  EXPECT_EQ(get("/v1/responses/" + done["id"].get<std::string>()).json(), done);
}

TEST_F(ResponsesHttpTest, BackgroundRunsAndCancels) {
  const Json queued = create({{"input", "Hi"}, {"background", true}}).json();
  EXPECT_TRUE(queued["status"] == "queued" || queued["status"] == "in_progress") << queued;
  EXPECT_EQ(queued["background"], true);
  const std::string path = "/v1/responses/" + queued["id"].get<std::string>();
  ASSERT_TRUE(keel::testing::eventually([&] { return get(path).json()["status"] == "completed"; }));
  EXPECT_EQ(get(path).json()["output"][0]["content"][0]["text"], "Hi there");

  script("Never ending", FakeScript::Stall::kDecode);
  const Json running = create({{"input", "Go"}, {"background", true}}).json();
  const std::string id = running["id"];
  ASSERT_TRUE(h_.engine().wait_for_submits(2, std::chrono::seconds(10)));
  // In progress, with the output so far (the one token before the stall).
  ASSERT_TRUE(keel::testing::eventually([&] {
    const Json j = get("/v1/responses/" + id).json();
    return j["status"] == "in_progress" && j["output"].size() == 1 &&
           j["output"][0]["content"][0]["text"] == "N";
  })) << get("/v1/responses/" + id).body;
  HttpResult c = http_request(h_.port(), "POST", "/v1/responses/" + id + "/cancel");
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(c.json()["status"], "cancelled");
  EXPECT_TRUE(h_.engine().wait_for_aborted(h_.engine().keys().at(1), std::chrono::seconds(10)));
  EXPECT_EQ(get("/v1/responses/" + id).json()["status"], "cancelled");
  // Cancelling again returns the cancelled response.
  EXPECT_EQ(http_request(h_.port(), "POST", "/v1/responses/" + id + "/cancel").json()["status"],
            "cancelled");
}

TEST_F(ResponsesHttpTest, ErrorsAreOpenAIErrors) {
  HttpResult r = create({{"input", "x"}, {"tools", Json::parse(R"([{"type": "file_search"}])")}});
  ASSERT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["code"], "unsupported_tool");
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("file_search"), std::string::npos);
  r = create({{"input", "x"}, {"previous_response_id", "resp_nope"}});
  ASSERT_EQ(r.status, 404);
  EXPECT_EQ(r.json()["error"]["code"], "previous_response_not_found");
  EXPECT_EQ(get("/v1/responses/resp_nope").status, 404);
  EXPECT_EQ(create({{"input", "x"}, {"model", "other"}}).status, 404);
  r = create({{"input", "x"}, {"max_output_tokens", 5000}});
  ASSERT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["param"], "input");  // the chat path's "messages", renamed
  r = create({{"input", "x"},
              {"text", {{"format", {{"type", "json_schema"}, {"name", "n"}, {"schema", 5}}}}}});
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_TRUE(r.json()["error"]["param"].get<std::string>().starts_with("text.format")) << r.body;
  const Json fg = create({{"input", "x"}}).json();
  r = http_request(h_.port(), "POST", "/v1/responses/" + fg["id"].get<std::string>() + "/cancel");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(http_request(h_.port(), "GET", "/v1/responses").status, 405);
  EXPECT_EQ(get("/v1/responses/x/other").status, 404);
  // store: false keeps nothing.
  const Json unstored = create({{"input", "x"}, {"store", false}}).json();
  EXPECT_EQ(get("/v1/responses/" + unstored["id"].get<std::string>()).status, 404);
}

TEST(ResponsesRestartTest, AChainContinuesAfterARestart) {
  ServerConfig config = test_config();
  config.state_dir = keel::testing::make_temp_dir("responses_restart");
  std::string id;
  std::vector<int32_t> first_prompt;
  Json first_output;
  {
    ServerHarness h(config, 4096);
    const Json r = post_json(h.port(), "/v1/responses", {{"input", "Hello"}}).json();
    ASSERT_EQ(r["status"], "completed") << r;
    id = r["id"];
    first_output = r["output"];
  }
  ServerHarness h(config, 4096);
  HttpResult got = http_request(h.port(), "GET", "/v1/responses/" + id);
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(got.json()["output"], first_output);
  const Json next =
      post_json(h.port(), "/v1/responses", {{"input", "More"}, {"previous_response_id", id}})
          .json();
  ASSERT_EQ(next["status"], "completed") << next;
  Json history = Json::array({Json{{"role", "user"}, {"content", "Hello"}}});
  for (const Json& item : first_output) history.push_back(item);
  history.push_back({{"role", "user"}, {"content", "More"}});
  ASSERT_EQ(post_json(h.port(), "/v1/responses", {{"input", history}}).status, 200);
  ASSERT_EQ(h.engine().submitted().size(), 2u);
  EXPECT_EQ(h.engine().submitted()[0].prompt_tokens, h.engine().submitted()[1].prompt_tokens);
}

}  // namespace
}  // namespace keel::server::testing
