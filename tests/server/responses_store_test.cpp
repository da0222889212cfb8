// ResponsesStore: put/find/update/remove, the history of a chain (oldest first: inputs then
// outputs), its errors (an unknown or broken chain → 404 previous_response_not_found, an
// unfinished link → 400), the count and byte bounds (oldest finished evicted, unfinished never,
// an oversized response refused), and durability: a new store on the same state directory finds
// the responses, their items and token ids again; one left unfinished comes back failed.
#include <gtest/gtest.h>

#include "core/file_system.h"
#include "server/responses_items.h"
#include "server/responses_store.h"
#include "support/test_support.h"

namespace keel::server {
namespace {

StoredResponse response(std::string id, std::string prev = "",
                        ResponseStatus status = ResponseStatus::kCompleted) {
  StoredResponse r;
  r.id = std::move(id);
  r.previous_response_id = std::move(prev);
  r.input_items.push_back(message_output_item("in_" + r.id, "input of " + r.id));
  r.input_items[0]["role"] = "user";
  OrderedJson output = OrderedJson::array();
  output.push_back(message_output_item("out_" + r.id, "output of " + r.id));
  r.response = {{"id", r.id}, {"status", response_status_name(status)}, {"output", output}};
  r.prompt_tokens = {1, 2, 3};
  r.output_tokens = {4, 5};
  return r;
}

std::vector<std::string> ids_of(const OrderedJson& items) {
  std::vector<std::string> out;
  for (const OrderedJson& i : items) out.push_back(i["id"].get<std::string>());
  return out;
}

TEST(ResponsesStoreTest, PutFindUpdateRemove) {
  ResponsesStore store(100, 1 << 20);
  ASSERT_TRUE(store.put(response("resp_a")).ok());
  std::optional<StoredResponse> r = store.find("resp_a");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status(), ResponseStatus::kCompleted);
  EXPECT_EQ(r->prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(store.find("resp_b"));
  r = store.update("resp_a", [](StoredResponse& s) { s.response["status"] = "failed"; });
  ASSERT_TRUE(r);
  EXPECT_EQ(store.find("resp_a")->status(), ResponseStatus::kFailed);
  EXPECT_FALSE(store.update("resp_b", [](StoredResponse&) {}));
  EXPECT_TRUE(store.remove("resp_a"));
  EXPECT_FALSE(store.remove("resp_a"));
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.used_bytes(), 0u);
}

TEST(ResponsesStoreTest, HistoryWalksTheChainOldestFirst) {
  ResponsesStore store(100, 1 << 20);
  ASSERT_TRUE(store.put(response("resp_1")).ok());
  ASSERT_TRUE(store.put(response("resp_2", "resp_1")).ok());
  ASSERT_TRUE(store.put(response("resp_3", "resp_2")).ok());
  ApiResult<OrderedJson> h = store.history("resp_3");
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(ids_of(h.value()), (std::vector<std::string>{"in_resp_1", "out_resp_1", "in_resp_2",
                                                         "out_resp_2", "in_resp_3", "out_resp_3"}));
  // The chain's first response names the agent program of every later turn (program_id.h).
  EXPECT_EQ(store.chain_root("resp_3"), "resp_1");
  EXPECT_EQ(store.chain_root("resp_1"), "resp_1");
  EXPECT_EQ(store.chain_root("resp_9"), "resp_9");
  ApiResult<OrderedJson> unknown = store.history("resp_9");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().status, 404);
  EXPECT_EQ(unknown.error().code, "previous_response_not_found");
  EXPECT_EQ(unknown.error().param, "previous_response_id");
  ASSERT_TRUE(store.remove("resp_1"));  // a broken chain
  ApiResult<OrderedJson> broken = store.history("resp_3");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.error().status, 404);
  EXPECT_NE(broken.error().message.find("resp_1"), std::string::npos);
  ASSERT_TRUE(store.put(response("resp_4", "", ResponseStatus::kInProgress)).ok());
  ApiResult<OrderedJson> busy = store.history("resp_4");
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.error().status, 400);
  EXPECT_EQ(busy.error().code, "previous_response_not_finished");
}

TEST(ResponsesStoreTest, BoundsEvictTheOldestFinished) {
  ResponsesStore store(3, 1 << 20);
  ASSERT_TRUE(store.put(response("resp_q", "", ResponseStatus::kQueued)).ok());
  for (const char* id : {"resp_a", "resp_b", "resp_c", "resp_d"}) {
    ASSERT_TRUE(store.put(response(id)).ok());
  }
  EXPECT_EQ(store.size(), 3u);
  EXPECT_TRUE(store.find("resp_q"));  // unfinished: never evicted
  EXPECT_FALSE(store.find("resp_a"));
  EXPECT_FALSE(store.find("resp_b"));
  EXPECT_TRUE(store.find("resp_d"));

  const size_t one = response("resp_x").charged_bytes();
  ResponsesStore small(100, 2 * one + one / 2);
  for (const char* id : {"resp_x", "resp_y", "resp_z"}) ASSERT_TRUE(small.put(response(id)).ok());
  EXPECT_EQ(small.size(), 2u);
  EXPECT_FALSE(small.find("resp_x"));
  EXPECT_LE(small.used_bytes(), 2 * one + one / 2);
  ResponsesStore tiny(100, one - 1);
  EXPECT_FALSE(tiny.put(response("resp_x")).ok());
}

TEST(ResponsesStoreTest, ResponsesSurviveInTheStateStore) {
  const std::string dir = keel::testing::make_temp_dir("responses_store");
  PosixFileSystem fs;
  {
    Result<std::unique_ptr<state::StateStore>> state = state::StateStore::open(&fs, dir);
    ASSERT_TRUE(state.ok()) << state.status().message();
    ResponsesStore store(100, 1 << 20);
    ASSERT_TRUE(store.attach(state->get()).ok());
    ASSERT_TRUE(store.put(response("resp_1")).ok());
    ASSERT_TRUE(store.put(response("resp_2", "resp_1")).ok());
    ASSERT_TRUE(store.put(response("resp_gone")).ok());
    ASSERT_TRUE(store.put(response("resp_bg", "", ResponseStatus::kInProgress)).ok());
    EXPECT_TRUE(store.remove("resp_gone"));
  }
  Result<std::unique_ptr<state::StateStore>> state = state::StateStore::open(&fs, dir);
  ASSERT_TRUE(state.ok()) << state.status().message();
  ResponsesStore store(100, 1 << 20);
  ASSERT_TRUE(store.attach(state->get()).ok());
  EXPECT_EQ(store.size(), 3u);
  EXPECT_FALSE(store.find("resp_gone"));
  std::optional<StoredResponse> r = store.find("resp_2");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->previous_response_id, "resp_1");
  EXPECT_EQ(r->output_tokens, (std::vector<int32_t>{4, 5}));
  ApiResult<OrderedJson> h = store.history("resp_2");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h.value().size(), 4u);
  std::optional<StoredResponse> bg = store.find("resp_bg");
  ASSERT_TRUE(bg);
  EXPECT_EQ(bg->status(), ResponseStatus::kFailed);
  EXPECT_EQ(bg->response["error"]["code"], "server_restarted");
}

}  // namespace
}  // namespace keel::server
