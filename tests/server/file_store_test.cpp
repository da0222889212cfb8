// FileStore: the per-file and total budgets (with the per-file overhead), remove() freeing room,
// list() order, purpose filter, limit/has_more and `after`; shared content outliving a remove.
#include <gtest/gtest.h>

#include "server/file_store.h"

namespace keel::server {
namespace {

TEST(FileStoreTest, BudgetsAndRemove) {
  FileStore store(/*max_file_bytes=*/1000, /*max_total_bytes=*/2000 + 2 * kFileOverheadBytes);
  EXPECT_EQ(store.add("f1", "batch", "a", std::string(1001, 'x'), true).error().status, 413);
  // Outputs are bound by the total only.
  ASSERT_TRUE(store.add("f1", "batch_output", "a", std::string(1500, 'x'), false).ok());
  ApiResult<StoredFile> full = store.add("f2", "batch", "b", std::string(600, 'y'), true);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code, "file_store_full");
  std::shared_ptr<const std::string> kept = store.find("f1")->content;
  EXPECT_TRUE(store.remove("f1"));
  EXPECT_FALSE(store.remove("f1"));
  EXPECT_EQ(kept->size(), 1500u);  // a reader keeps the bytes
  EXPECT_EQ(store.used_bytes(), 0u);
  EXPECT_TRUE(store.add("f2", "batch", "b", std::string(600, 'y'), true).ok());
  EXPECT_EQ(store.used_bytes(), 600 + kFileOverheadBytes);
  const nlohmann::json j = store.find("f2")->to_json();
  EXPECT_EQ(j["bytes"], 600);
  EXPECT_EQ(j["object"], "file");
  EXPECT_EQ(j["purpose"], "batch");
}

TEST(FileStoreTest, ListOrderFilterAndPaging) {
  FileStore store(100, 100'000);
  for (const char* id : {"a", "b", "c", "d"}) {
    ASSERT_TRUE(
        store.add(id, std::string(id) == "c" ? "batch_output" : "batch", "", "x", true).ok());
  }
  auto ids = [](const FileStore::Page& p) {
    std::string s;
    for (const StoredFile& f : p.files) s += f.id;
    return s;
  };
  EXPECT_EQ(ids(store.list("", 10, "", false)), "dcba");
  EXPECT_EQ(ids(store.list("", 10, "", true)), "abcd");
  EXPECT_EQ(ids(store.list("batch", 10, "", true)), "abd");
  const FileStore::Page first = store.list("", 2, "", true);
  EXPECT_EQ(ids(first), "ab");
  EXPECT_TRUE(first.has_more);
  const FileStore::Page rest = store.list("", 2, "b", true);
  EXPECT_EQ(ids(rest), "cd");
  EXPECT_FALSE(rest.has_more);
  EXPECT_EQ(ids(store.list("", 2, "zz", true)), "");
}

}  // namespace
}  // namespace keel::server
