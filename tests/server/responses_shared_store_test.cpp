// ResponsesStore over a shared state store (responses_store.h, "Shared"): two stores stand for
// two gateways on one --responses-dir. A chain created through one is looked up, continued and
// walked through the other; a deletion through one is seen by the other (its cached copy
// dropped, a chain through it 404 previous_response_not_found); another gateway's unfinished
// response is read again on every lookup and is not failed when this gateway restarts, while
// the owner's own are; a damaged or malformed record is a 500 naming it, never a crash; the
// owner id survives a restart on the same state directory.
#include <gtest/gtest.h>

#include <fstream>

#include "core/file_system.h"
#include "server/responses_items.h"
#include "server/responses_owner.h"
#include "server/responses_store.h"
#include "support/test_support.h"

namespace keel::server {
namespace {

StoredResponse stored(std::string id, std::string prev = "",
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

// One gateway: its own handle on the shared directory and its store.
struct SharedGateway {
  std::unique_ptr<state::StateStore> state;
  std::unique_ptr<ResponsesStore> store;
};

class SharedResponsesTest : public ::testing::Test {
 protected:
  SharedGateway gateway(const std::string& owner) {
    SharedGateway g;
    Result<std::unique_ptr<state::StateStore>> s = state::StateStore::open_shared(&fs_, dir_);
    EXPECT_TRUE(s.ok()) << s.status().message();
    g.state = std::move(*s);
    g.store = std::make_unique<ResponsesStore>(100, 1 << 20);
    const Status st = g.store->attach(g.state.get(), owner);
    EXPECT_TRUE(st.ok()) << st.message();
    return g;
  }
  std::string record_path(const std::string& id) const {
    return dir_ + "/responses/" + id + ".rec";
  }

  PosixFileSystem fs_;
  std::string dir_ = keel::testing::make_temp_dir("responses_shared");
};

TEST_F(SharedResponsesTest, AChainCreatedThroughOneGatewayContinuesThroughAnother) {
  SharedGateway a = gateway("gw-a");
  SharedGateway b = gateway("gw-b");
  ASSERT_TRUE(a.store->put(stored("resp_1")).ok());
  ASSERT_TRUE(a.store->put(stored("resp_2", "resp_1")).ok());
  ApiResult<StoredResponse> r = b.store->lookup("resp_2");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().owner, "gw-a");
  EXPECT_EQ(r.value().output_tokens, (std::vector<int32_t>{4, 5}));
  ASSERT_TRUE(b.store->put(stored("resp_3", "resp_2")).ok());
  ApiResult<OrderedJson> h = a.store->history("resp_3");
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(h.value().size(), 6u);
  EXPECT_EQ(h.value()[0]["id"], "in_resp_1");
  EXPECT_EQ(h.value()[5]["id"], "out_resp_3");
  EXPECT_EQ(a.store->chain_root("resp_3"), "resp_1");
  EXPECT_EQ(b.store->lookup("resp_9").error().status, 404);
  EXPECT_EQ(b.store->lookup("../resp_1").error().status, 404);  // never a path
}

TEST_F(SharedResponsesTest, ADeletionThroughOneGatewayIsSeenByTheOther) {
  SharedGateway a = gateway("gw-a");
  SharedGateway b = gateway("gw-b");
  ASSERT_TRUE(a.store->put(stored("resp_1")).ok());
  ASSERT_TRUE(a.store->put(stored("resp_2", "resp_1")).ok());
  ASSERT_TRUE(b.store->history("resp_2").ok());  // b caches both
  ASSERT_TRUE(a.store->remove("resp_1"));
  EXPECT_FALSE(b.store->find("resp_1"));
  ApiResult<OrderedJson> broken = b.store->history("resp_2");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.error().status, 404);
  EXPECT_EQ(broken.error().code, "previous_response_not_found");
  EXPECT_NE(broken.error().message.find("resp_1"), std::string::npos);
  EXPECT_FALSE(b.store->remove("resp_1"));
  EXPECT_TRUE(b.store->remove("resp_2"));
  EXPECT_FALSE(a.store->find("resp_2"));
}

TEST_F(SharedResponsesTest, AnotherGatewaysUnfinishedResponseIsReadAgainAndLeftAloneOnRestart) {
  SharedGateway a = gateway("gw-a");
  SharedGateway b = gateway("gw-b");
  ASSERT_TRUE(a.store->put(stored("resp_bg", "", ResponseStatus::kInProgress)).ok());
  ApiResult<StoredResponse> seen = b.store->lookup("resp_bg");
  ASSERT_TRUE(seen.ok());
  EXPECT_EQ(seen.value().status(), ResponseStatus::kInProgress);
  EXPECT_TRUE(b.store->runs_elsewhere(seen.value()));
  EXPECT_FALSE(a.store->runs_elsewhere(seen.value()));
  EXPECT_EQ(b.store->history("resp_bg").error().code, "previous_response_not_finished");
  // The owner finishes it (the status is written; owner and version kept).
  ASSERT_TRUE(a.store->update("resp_bg", [](StoredResponse& r) {
    r = stored("resp_bg");
    r.owner.clear();
  }));
  seen = b.store->lookup("resp_bg");
  ASSERT_TRUE(seen.ok());
  EXPECT_EQ(seen.value().status(), ResponseStatus::kCompleted);
  EXPECT_EQ(seen.value().owner, "gw-a");

  ASSERT_TRUE(a.store->put(stored("resp_q", "", ResponseStatus::kQueued)).ok());
  SharedGateway b2 = gateway("gw-b");  // b restarts: a's run goes on
  EXPECT_EQ(b2.store->lookup("resp_q").value().status(), ResponseStatus::kQueued);
  EXPECT_EQ(a.store->lookup("resp_q").value().status(), ResponseStatus::kQueued);
  SharedGateway a2 = gateway("gw-a");  // a restarts: its run did not survive
  ApiResult<StoredResponse> failed = a2.store->lookup("resp_q");
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed.value().status(), ResponseStatus::kFailed);
  EXPECT_EQ(failed.value().response["error"]["code"], "server_restarted");
  EXPECT_EQ(b2.store->lookup("resp_q").value().status(), ResponseStatus::kFailed);
}

TEST_F(SharedResponsesTest, ADamagedRecordIsAnErrorNamingItNeverACrash) {
  SharedGateway a = gateway("gw-a");
  SharedGateway b = gateway("gw-b");
  ASSERT_TRUE(a.store->put(stored("resp_1")).ok());
  ASSERT_TRUE(a.store->put(stored("resp_2", "resp_1")).ok());
  std::string bytes = keel::testing::read_file(record_path("resp_1"));
  bytes[bytes.size() - 3] ^= 0x20;
  std::ofstream(record_path("resp_1"), std::ios::binary | std::ios::trunc) << bytes;
  ApiResult<OrderedJson> h = b.store->history("resp_2");
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.error().status, 500);
  EXPECT_NE(h.error().message.find("resp_1"), std::string::npos) << h.error().message;
  EXPECT_NE(h.error().message.find("checksum"), std::string::npos) << h.error().message;
  EXPECT_EQ(b.store->lookup("resp_1").error().status, 404);  // set aside: gone from now on

  // Whole and checksummed, but not a stored response.
  ASSERT_TRUE(a.state->put_record("responses", "resp_3", {{"seq", 1}}).ok());
  ApiResult<StoredResponse> odd = b.store->lookup("resp_3");
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.error().status, 500);
  EXPECT_NE(odd.error().message.find("malformed"), std::string::npos) << odd.error().message;
}

TEST_F(SharedResponsesTest, ASharedStoreNeedsAnOwnerAndTheOwnerSurvivesARestart) {
  Result<std::unique_ptr<state::StateStore>> s = state::StateStore::open_shared(&fs_, dir_);
  ASSERT_TRUE(s.ok());
  ResponsesStore store(100, 1 << 20);
  EXPECT_EQ(store.attach(s->get()).code(), StatusCode::kInvalidArgument);

  const std::string own = keel::testing::make_temp_dir("responses_owner");
  std::string first;
  {
    Result<std::unique_ptr<state::StateStore>> st = state::StateStore::open(&fs_, own);
    ASSERT_TRUE(st.ok());
    Result<std::string> id = responses_owner_id(st->get());
    ASSERT_TRUE(id.ok());
    first = *id;
  }
  Result<std::unique_ptr<state::StateStore>> st = state::StateStore::open(&fs_, own);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(*responses_owner_id(st->get()), first);
  EXPECT_TRUE(first.starts_with("gw-"));
  EXPECT_NE(*responses_owner_id(nullptr), first);
}

}  // namespace
}  // namespace keel::server
