// The Batch API over real HTTP against the fake engine: upload, create, poll, download — one
// output line per input line with matching custom_ids and the body a normal call returns; bad
// bodies, streaming lines and engine errors in the error file with their statuses; an invalid
// input file fails the batch with per-line `errors`; lines run concurrently (bounded by
// batch_concurrency); cancel mid-run aborts the lines in flight and starts no more; shutdown with
// a batch running returns promptly.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "batch_test_client.h"
#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"
#include "server_harness.h"

namespace keel::server::testing {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kChat = "/v1/chat/completions";
constexpr const char* kCompletions = "/v1/completions";

ServerConfig batch_config(int32_t concurrency) {
  ServerConfig c = test_config();
  c.batch_concurrency = concurrency;
  return c;
}

void hello_world_script(FakeEngine& engine) {
  engine.set_script([](const engine::GenerationRequest&) {
    FakeScript s;
    s.tokens = {kHello, kWorld};
    s.finish = engine::FinishReason::kStop;
    return s;
  });
}

std::string fmt_id(int i) { return "req-" + std::to_string(i); }

Json chat_body(const std::string& text) {
  return {{"model", "test-model"}, {"messages", {{{"role", "user"}, {"content", text}}}}};
}

TEST(BatchHttpTest, UploadRunAndDownloadOneOutputLinePerInput) {
  ServerHarness h(batch_config(4));
  hello_world_script(h.engine());
  std::vector<Json> lines;
  for (int i = 0; i < 10; ++i) lines.push_back(batch_line(fmt_id(i), kChat, chat_body("Hello")));
  HttpResult created = create_batch(h.port(), lines, kChat);
  ASSERT_EQ(created.status, 200) << created.body;
  const Json b0 = created.json();
  EXPECT_EQ(b0["object"], "batch");
  EXPECT_EQ(b0["status"], "validating");
  EXPECT_EQ(b0["endpoint"], kChat);
  EXPECT_EQ(b0["completion_window"], "24h");
  EXPECT_EQ(b0["expires_at"].get<int64_t>() - b0["created_at"].get<int64_t>(), 86400);
  EXPECT_TRUE(b0["errors"].is_null());

  const Json b = wait_batch_done(h.port(), b0["id"]);
  ASSERT_EQ(b["status"], "completed") << b.dump();
  EXPECT_EQ(b["request_counts"], Json({{"total", 10}, {"completed", 10}, {"failed", 0}}));
  EXPECT_TRUE(b["in_progress_at"].is_number());
  EXPECT_TRUE(b["finalizing_at"].is_number());
  EXPECT_TRUE(b["completed_at"].is_number());
  EXPECT_TRUE(b["error_file_id"].is_null());
  ASSERT_TRUE(b["output_file_id"].is_string());

  HttpResult file =
      http_request(h.port(), "GET", "/v1/files/" + b["output_file_id"].get<std::string>());
  ASSERT_EQ(file.status, 200);
  EXPECT_EQ(file.json()["purpose"], "batch_output");

  // The body a normal, non-streamed call returns (ids and timestamps aside).
  HttpResult direct = post_json(h.port(), kChat, chat_body("Hello"));
  ASSERT_EQ(direct.status, 200);
  Json expected = direct.json();
  const std::vector<Json> out = file_lines(h.port(), b["output_file_id"]);
  ASSERT_EQ(out.size(), 10u);
  std::set<std::string> custom_ids, ids;
  for (const Json& l : out) {
    custom_ids.insert(l["custom_id"].get<std::string>());
    ids.insert(l["id"].get<std::string>());
    EXPECT_TRUE(l["id"].get<std::string>().starts_with("batch_req_"));
    EXPECT_TRUE(l["error"].is_null());
    EXPECT_EQ(l["response"]["status_code"], 200);
    Json body = l["response"]["body"];
    EXPECT_EQ(body["id"], "chatcmpl-" + l["response"]["request_id"].get<std::string>());
    for (Json* j : {&body, &expected}) {
      j->erase("id");
      j->erase("created");
    }
    EXPECT_EQ(body, expected);
  }
  EXPECT_EQ(custom_ids.size(), 10u);
  EXPECT_EQ(ids.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(custom_ids.count(fmt_id(i))) << i;
}

TEST(BatchHttpTest, BadLinesGoToTheErrorFileWithTheirStatus) {
  ServerHarness h(batch_config(2));
  h.engine().set_script([](const engine::GenerationRequest& r) {
    FakeScript s;
    s.tokens = {kHello, kWorld};
    if (r.max_tokens == 7) {  // the line that should fail in the engine
      s.finish = engine::FinishReason::kError;
      s.error = "boom";
    }
    return s;
  });
  const std::vector<Json> lines = {
      batch_line("good", kCompletions, {{"prompt", "Hello"}, {"max_tokens", 4}}),
      batch_line("negative", kCompletions, {{"prompt", "Hello"}, {"max_tokens", -1}}),
      batch_line("stream", kCompletions, {{"prompt", "Hello"}, {"stream", true}}),
      batch_line("model", kCompletions, {{"prompt", "Hello"}, {"model", "other"}}),
      batch_line("engine", kCompletions, {{"prompt", "Hello"}, {"max_tokens", 7}}),
  };
  HttpResult created = create_batch(h.port(), lines, kCompletions);
  ASSERT_EQ(created.status, 200) << created.body;
  const Json b = wait_batch_done(h.port(), created.json()["id"]);
  ASSERT_EQ(b["status"], "completed") << b.dump();
  EXPECT_EQ(b["request_counts"], Json({{"total", 5}, {"completed", 1}, {"failed", 4}}));
  const std::vector<Json> out = file_lines(h.port(), b["output_file_id"]);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["custom_id"], "good");
  EXPECT_EQ(out[0]["response"]["body"]["object"], "text_completion");
  const std::vector<Json> errs = file_lines(h.port(), b["error_file_id"]);
  ASSERT_EQ(errs.size(), 4u);
  std::map<std::string, Json> by_id;
  for (const Json& e : errs) by_id[e["custom_id"]] = e["response"];
  EXPECT_EQ(by_id["negative"]["status_code"], 400);
  EXPECT_EQ(by_id["negative"]["body"]["error"]["param"], "max_tokens");
  EXPECT_EQ(by_id["stream"]["status_code"], 400);
  EXPECT_EQ(by_id["stream"]["body"]["error"]["param"], "stream");
  EXPECT_EQ(by_id["model"]["status_code"], 404);
  EXPECT_EQ(by_id["model"]["body"]["error"]["code"], "model_not_found");
  EXPECT_EQ(by_id["engine"]["status_code"], 500);
  HttpResult ef =
      http_request(h.port(), "GET", "/v1/files/" + b["error_file_id"].get<std::string>());
  EXPECT_EQ(ef.json()["purpose"], "batch_error");
}

TEST(BatchHttpTest, AnInvalidInputFileFailsTheBatchWithLineErrors) {
  ServerHarness h(batch_config(2));
  hello_world_script(h.engine());
  const Json good = batch_line("a", kChat, chat_body("Hi"));
  Json wrong_method = batch_line("b", kChat, chat_body("Hi"));
  wrong_method["method"] = "GET";
  const Json wrong_url = batch_line("c", kCompletions, {{"prompt", "Hi"}});
  const Json dup = batch_line("a", kChat, chat_body("Hi"));
  const std::string content = good.dump() + "\n{not json\n" + wrong_method.dump() + "\n\n" +
                              wrong_url.dump() + "\n" + dup.dump() + "\n";
  HttpResult file = upload(h.port(), content);
  ASSERT_EQ(file.status, 200) << file.body;
  HttpResult created = post_json(
      h.port(), "/v1/batches",
      {{"input_file_id", file.json()["id"]}, {"endpoint", kChat}, {"completion_window", "24h"}});
  ASSERT_EQ(created.status, 200) << created.body;
  const Json b = wait_batch_done(h.port(), created.json()["id"]);
  ASSERT_EQ(b["status"], "failed") << b.dump();
  EXPECT_TRUE(b["failed_at"].is_number());
  EXPECT_EQ(b["errors"]["object"], "list");
  std::vector<std::pair<std::string, int64_t>> got;
  for (const Json& e : b["errors"]["data"]) got.emplace_back(e["code"], e["line"]);
  const std::vector<std::pair<std::string, int64_t>> want = {{"invalid_json_line", 2},
                                                             {"invalid_method", 3},
                                                             {"mismatched_endpoint", 5},
                                                             {"duplicate_custom_id", 6}};
  EXPECT_EQ(got, want) << b["errors"].dump();
  EXPECT_TRUE(h.engine().submitted().empty());

  HttpResult empty = upload(h.port(), "\n\n");
  ASSERT_EQ(empty.status, 200);
  HttpResult eb = post_json(
      h.port(), "/v1/batches",
      {{"input_file_id", empty.json()["id"]}, {"endpoint", kChat}, {"completion_window", "24h"}});
  const Json failed = wait_batch_done(h.port(), eb.json()["id"]);
  EXPECT_EQ(failed["status"], "failed");
  EXPECT_EQ(failed["errors"]["data"][0]["code"], "empty_file");
}

TEST(BatchHttpTest, LinesRunConcurrentlyUpToTheLimit) {
  ServerHarness h(batch_config(4));
  h.engine().set_script([](const engine::GenerationRequest&) {
    FakeScript s;
    s.tokens = {kHello, kWorld, kBang};
    s.token_delay = 15ms;
    return s;
  });
  std::vector<Json> lines;
  for (int i = 0; i < 12; ++i) lines.push_back(batch_line(fmt_id(i), kChat, chat_body("Hi")));
  HttpResult created = create_batch(h.port(), lines, kChat);
  ASSERT_EQ(created.status, 200) << created.body;
  const std::string id = created.json()["id"];
  size_t max_active = 0;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  Json b;
  while (std::chrono::steady_clock::now() < deadline) {
    max_active = std::max(max_active, h.engine().num_active());
    b = http_request(h.port(), "GET", "/v1/batches/" + id).json();
    if (b["status"] == "completed") break;
    std::this_thread::sleep_for(2ms);
  }
  ASSERT_EQ(b["status"], "completed") << b.dump();
  EXPECT_GT(max_active, 1u);
  EXPECT_LE(max_active, 4u);
  EXPECT_EQ(b["request_counts"]["completed"], 12);
}

TEST(BatchHttpTest, CancelAbortsTheLinesInFlightAndStartsNoMore) {
  ServerHarness h(batch_config(3));
  h.engine().set_script([](const engine::GenerationRequest&) {
    FakeScript s;
    s.tokens = {kHello};
    s.stall = FakeScript::Stall::kQueued;  // held until aborted
    return s;
  });
  std::vector<Json> lines;
  for (int i = 0; i < 10; ++i) lines.push_back(batch_line(fmt_id(i), kChat, chat_body("Hi")));
  HttpResult created = create_batch(h.port(), lines, kChat);
  ASSERT_EQ(created.status, 200) << created.body;
  const std::string id = created.json()["id"];
  ASSERT_TRUE(h.engine().wait_for_submits(3, 5s));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(h.engine().num_active(), 3u);  // the batch's lines are in flight together
  EXPECT_EQ(http_request(h.port(), "GET", "/v1/batches/" + id).json()["status"], "in_progress");

  HttpResult cancel = http_request(h.port(), "POST", "/v1/batches/" + id + "/cancel");
  ASSERT_EQ(cancel.status, 200) << cancel.body;
  const std::string status = cancel.json()["status"];
  EXPECT_TRUE(status == "cancelling" || status == "cancelled") << status;
  const Json b = wait_batch_done(h.port(), id);
  ASSERT_EQ(b["status"], "cancelled") << b.dump();
  EXPECT_TRUE(b["cancelling_at"].is_number());
  EXPECT_TRUE(b["cancelled_at"].is_number());
  EXPECT_EQ(b["request_counts"], Json({{"total", 10}, {"completed", 0}, {"failed", 0}}));
  EXPECT_TRUE(h.engine().wait_for_idle(5s));
  EXPECT_EQ(h.engine().total_aborts(), 3);
  EXPECT_EQ(h.engine().submitted().size(), 3u);
  EXPECT_TRUE(b["output_file_id"].is_null());
  // A finished batch cannot be cancelled again.
  HttpResult again = http_request(h.port(), "POST", "/v1/batches/" + id + "/cancel");
  EXPECT_EQ(again.status, 409);
  EXPECT_EQ(http_request(h.port(), "POST", "/v1/batches/batch_nope/cancel").status, 404);
}

// A batch line's JSON Schema keeps the key order of the input file's text, as a request's does
// (server/schema_order.h): the properties come in the declared order.
TEST(BatchHttpTest, SchemasKeepTheOrderSent) {
  ServerHarness h(batch_config(1));
  hello_world_script(h.engine());
  const std::string line = R"({"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
      "body": {"model": "test-model", "messages": [{"role": "user", "content": "Hi"}],
      "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": {
      "type": "object", "properties": {"zeta": {"type": "integer"}, "alpha": {"type": "string"}},
      "required": ["zeta", "alpha"]}}}}})";
  std::string text = line;
  std::replace(text.begin(), text.end(), '\n', ' ');
  HttpResult file = upload(h.port(), text + "\n");
  ASSERT_EQ(file.status, 200) << file.body;
  HttpResult created = post_json(
      h.port(), "/v1/batches",
      {{"input_file_id", file.json()["id"]}, {"endpoint", kChat}, {"completion_window", "24h"}});
  ASSERT_EQ(created.status, 200) << created.body;
  const Json done = wait_batch_done(h.port(), created.json()["id"]);
  EXPECT_EQ(done["status"], "completed") << done.dump();
  const std::vector<engine::GenerationRequest> reqs = h.engine().submitted();
  ASSERT_EQ(reqs.size(), 1u);
  Result<grammar::Grammar> g = grammar::parse_gbnf(reqs[0].grammar);
  ASSERT_TRUE(g.ok()) << reqs[0].grammar;
  auto accepts = [&](std::string_view doc) {
    grammar::StackSet s = grammar::initial_state(*g);
    return grammar::advance(*g, doc, &s) && s.has_complete();
  };
  EXPECT_TRUE(accepts(R"({"zeta": 1, "alpha": "x"})"));
  EXPECT_FALSE(accepts(R"({"alpha": "x", "zeta": 1})"));
}

TEST(BatchHttpTest, CreateRequestErrors) {
  ServerHarness h(batch_config(1));
  HttpResult file = upload(h.port(), jsonl({batch_line("a", kChat, chat_body("Hi"))}));
  ASSERT_EQ(file.status, 200);
  const std::string fid = file.json()["id"];
  auto create = [&](const Json& body) { return post_json(h.port(), "/v1/batches", body); };
  const Json ok = {{"input_file_id", fid}, {"endpoint", kChat}, {"completion_window", "24h"}};
  struct Case {
    Json patch;
    int status;
    std::string param;
  };
  const std::vector<Case> cases = {
      {{{"input_file_id", "file-nope"}}, 404, "input_file_id"},
      {{{"input_file_id", nullptr}}, 400, "input_file_id"},
      {{{"endpoint", "/v1/embeddings"}}, 400, "endpoint"},
      {{{"completion_window", "1h"}}, 400, "completion_window"},
      {{{"metadata", "x"}}, 400, "metadata"},
      {{{"metadata", {{"k", 1}}}}, 400, "metadata"},
  };
  for (const Case& c : cases) {
    Json body = ok;
    body.merge_patch(c.patch);
    HttpResult r = create(body);
    EXPECT_EQ(r.status, c.status) << c.patch.dump() << " " << r.body;
    EXPECT_EQ(r.json()["error"]["param"], c.param) << r.body;
  }
  EXPECT_EQ(http_request(h.port(), "POST", "/v1/batches", "{").status, 400);
  EXPECT_EQ(http_request(h.port(), "GET", "/v1/batches/batch_nope").status, 404);
  EXPECT_EQ(http_request(h.port(), "GET", "/v1/batches/x/cancel").status, 405);
  EXPECT_EQ(http_request(h.port(), "GET", "/v1/batches/x/other").status, 404);
}

TEST(BatchHttpTest, ListBatchesNewestFirstWithLimitAndAfter) {
  ServerHarness h(batch_config(1));
  hello_world_script(h.engine());
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    HttpResult r = create_batch(h.port(), {batch_line("a", kChat, chat_body("Hi"))}, kChat);
    ASSERT_EQ(r.status, 200) << r.body;
    ids.push_back(r.json()["id"]);
  }
  for (const std::string& id : ids) wait_batch_done(h.port(), id);
  HttpResult page1 = http_request(h.port(), "GET", "/v1/batches?limit=2");
  ASSERT_EQ(page1.status, 200) << page1.body;
  const Json p1 = page1.json();
  EXPECT_EQ(p1["object"], "list");
  ASSERT_EQ(p1["data"].size(), 2u);
  EXPECT_EQ(p1["data"][0]["id"], ids[2]);
  EXPECT_EQ(p1["data"][1]["id"], ids[1]);
  EXPECT_EQ(p1["has_more"], true);
  EXPECT_EQ(p1["last_id"], ids[1]);
  const Json p2 = http_request(h.port(), "GET", "/v1/batches?limit=2&after=" + ids[1]).json();
  ASSERT_EQ(p2["data"].size(), 1u);
  EXPECT_EQ(p2["data"][0]["id"], ids[0]);
  EXPECT_EQ(p2["has_more"], false);
  EXPECT_EQ(http_request(h.port(), "GET", "/v1/batches?limit=0").status, 400);
  EXPECT_EQ(http_request(h.port(), "GET", "/v1/batches?limit=101").status, 400);
}

TEST(BatchHttpTest, ShutdownWithARunningBatchReturnsPromptly) {
  ServerHarness h(batch_config(2));
  h.engine().set_script([](const engine::GenerationRequest&) {
    FakeScript s;
    s.tokens = {kHello, kWorld};
    s.stall = FakeScript::Stall::kDecode;  // one token, then held until aborted
    return s;
  });
  std::vector<Json> lines;
  for (int i = 0; i < 6; ++i) lines.push_back(batch_line(fmt_id(i), kChat, chat_body("Hi")));
  ASSERT_EQ(create_batch(h.port(), lines, kChat).status, 200);
  ASSERT_TRUE(h.engine().wait_for_submits(2, 5s));
  const auto start = std::chrono::steady_clock::now();
  h.server().shutdown();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_TRUE(h.engine().wait_for_idle(5s));
  EXPECT_EQ(h.engine().total_aborts(), 2);
}

}  // namespace
}  // namespace keel::server::testing
