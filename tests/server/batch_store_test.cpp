// BatchStore and the Batch object: every OpenAI field present (nulls included), errors as a list
// object, update(), newest-first paging with `after`, and eviction of the oldest finished batch
// (never a running one) at kMaxBatches.
#include <gtest/gtest.h>

#include "server/batch_store.h"

namespace keel::server {
namespace {

BatchRecord record(std::string id, BatchStatus status = BatchStatus::kValidating) {
  BatchRecord r;
  r.id = std::move(id);
  r.endpoint = "/v1/chat/completions";
  r.input_file_id = "file-1";
  r.completion_window = "24h";
  r.status = status;
  r.created_at = 100;
  r.expires_at = 100 + 86400;
  return r;
}

TEST(BatchStoreTest, ObjectShape) {
  BatchRecord r = record("batch_1");
  nlohmann::json j = r.to_json();
  for (const char* key : {"id",
                          "object",
                          "endpoint",
                          "errors",
                          "input_file_id",
                          "completion_window",
                          "status",
                          "output_file_id",
                          "error_file_id",
                          "created_at",
                          "in_progress_at",
                          "expires_at",
                          "finalizing_at",
                          "completed_at",
                          "failed_at",
                          "expired_at",
                          "cancelling_at",
                          "cancelled_at",
                          "request_counts",
                          "metadata"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["object"], "batch");
  EXPECT_EQ(j["status"], "validating");
  EXPECT_TRUE(j["errors"].is_null());
  EXPECT_TRUE(j["completed_at"].is_null());
  r.errors.push_back({"invalid_json_line", "bad", std::nullopt, 3});
  r.status = BatchStatus::kFailed;
  j = r.to_json();
  EXPECT_EQ(j["status"], "failed");
  EXPECT_EQ(j["errors"]["object"], "list");
  EXPECT_EQ(j["errors"]["data"][0]["line"], 3);
  EXPECT_TRUE(j["errors"]["data"][0]["param"].is_null());
}

TEST(BatchStoreTest, UpdateListAndEviction) {
  BatchStore store;
  store.add(record("running", BatchStatus::kInProgress));
  store.add(record("done", BatchStatus::kCompleted));
  std::optional<BatchRecord> r = store.update("running", [](BatchRecord& b) { b.completed = 5; });
  ASSERT_TRUE(r);
  EXPECT_EQ(r->completed, 5);
  EXPECT_FALSE(store.update("nope", [](BatchRecord&) {}));
  for (size_t i = 2; i < kMaxBatches; ++i) store.add(record("b" + std::to_string(i)));
  store.add(record("newest"));
  EXPECT_TRUE(store.find("running"));  // running: kept
  EXPECT_FALSE(store.find("done"));    // the oldest finished one: forgotten
  const BatchStore::Page page = store.list(2, "");
  ASSERT_EQ(page.batches.size(), 2u);
  EXPECT_EQ(page.batches[0].id, "newest");
  EXPECT_TRUE(page.has_more);
  const BatchStore::Page after = store.list(1, "newest");
  ASSERT_EQ(after.batches.size(), 1u);
  EXPECT_EQ(after.batches[0].id, "b" + std::to_string(kMaxBatches - 1));
}

}  // namespace
}  // namespace keel::server
