// BatchStore and the Batch object: every OpenAI field present (nulls included), errors as a list
// object, update(), newest-first paging with `after`, and eviction of the oldest finished batch
// (never a running one) at kMaxBatches; the state JSON round trip (and a malformed one named);
// with a state store: records found again by a new store (persisted updates only), unfinished(),
// progress logs (the first entry of a custom_id counts) and their removal.
#include <gtest/gtest.h>

#include <filesystem>

#include "server/batch_store.h"
#include "support/test_support.h"

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
  ASSERT_TRUE(store.add(record("running", BatchStatus::kInProgress)).ok());
  ASSERT_TRUE(store.add(record("done", BatchStatus::kCompleted)).ok());
  std::optional<BatchRecord> r = store.update("running", [](BatchRecord& b) { b.completed = 5; });
  ASSERT_TRUE(r);
  EXPECT_EQ(r->completed, 5);
  EXPECT_FALSE(store.update("nope", [](BatchRecord&) {}));
  for (size_t i = 2; i < kMaxBatches; ++i) {
    ASSERT_TRUE(store.add(record("b" + std::to_string(i))).ok());
  }
  ASSERT_TRUE(store.add(record("newest")).ok());
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

TEST(BatchStoreTest, StateJsonRoundTrips) {
  BatchRecord r = record("batch_7", BatchStatus::kCancelled);
  r.metadata = {{"k", "v"}};
  r.errors = {{"code_a", "message a", "param_a", 4},
              {"code_b", "message b", std::nullopt, std::nullopt}};
  r.output_file_id = "file-o";
  r.in_progress_at = 101;
  r.cancelling_at = 102;
  r.cancelled_at = 103;
  r.total = 9;
  r.completed = 3;
  r.failed = 2;
  r.planned_output_file_id = "file-o";
  r.planned_error_file_id = "file-e";
  Result<std::pair<BatchRecord, uint64_t>> back = batch_record_from_state_json(r.to_state_json(42));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->second, 42u);
  EXPECT_EQ(back->first.to_state_json(42), r.to_state_json(42));
  EXPECT_FALSE(r.to_json().contains("keel"));  // not in the API object

  nlohmann::json bad = r.to_state_json(1);
  bad["status"] = "sleeping";
  EXPECT_EQ(batch_record_from_state_json(bad).status().message(),
            "batch record: unknown status \"sleeping\"");
  bad = r.to_state_json(1);
  bad.erase("request_counts");
  EXPECT_EQ(batch_record_from_state_json(bad).status().code(), StatusCode::kCorrupt);
}

TEST(BatchStoreTest, RecordsAndProgressSurviveInTheStateStore) {
  const std::string dir = testing::make_temp_dir("batch_store");
  PosixFileSystem fs;
  {
    std::unique_ptr<state::StateStore> state = std::move(*state::StateStore::open(&fs, dir));
    BatchStore store;
    ASSERT_TRUE(store.attach(state.get()).ok());
    ASSERT_TRUE(store.add(record("batch_a", BatchStatus::kInProgress)).ok());
    ASSERT_TRUE(store.add(record("batch_b", BatchStatus::kCompleted)).ok());
    store.update("batch_a", [](BatchRecord& r) { r.total = 3; });
    store.update(
        "batch_a", [](BatchRecord& r) { r.completed = 2; }, /*persist=*/false);
    for (const char* id : {"x", "y", "x"}) {  // x ran twice: its first entry counts
      ASSERT_TRUE(
          store.record_line("batch_a", {id, std::string(id) == "y", std::string(id) + "1"}).ok());
    }
  }
  std::unique_ptr<state::StateStore> state = std::move(*state::StateStore::open(&fs, dir));
  BatchStore store;
  ASSERT_TRUE(store.attach(state.get()).ok());
  std::optional<BatchRecord> a = store.find("batch_a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->total, 3);
  EXPECT_EQ(a->completed, 0);  // counts come from the progress log
  const std::vector<BatchRecord> unfinished = store.unfinished();
  ASSERT_EQ(unfinished.size(), 1u);
  EXPECT_EQ(unfinished[0].id, "batch_a");
  EXPECT_EQ(store.list(10, "").batches.front().id, "batch_b");  // creation order kept
  const std::vector<FinishedLine> lines = store.finished_lines("batch_a");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].custom_id, "x");
  EXPECT_FALSE(lines[0].ok);
  EXPECT_EQ(lines[0].jsonl, "x1");
  EXPECT_EQ(lines[1].custom_id, "y");
  EXPECT_TRUE(lines[1].ok);
  store.forget_lines("batch_a");
  EXPECT_TRUE(store.finished_lines("batch_a").empty());
  EXPECT_FALSE(std::filesystem::exists(dir + "/batches/batch_a.log"));
  ASSERT_TRUE(store.add(record("batch_c")).ok());
  EXPECT_EQ(store.list(10, "").batches.front().id, "batch_c");
}

}  // namespace
}  // namespace keel::server
