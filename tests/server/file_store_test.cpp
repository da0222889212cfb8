// FileStore: the per-file and total budgets (with the per-file overhead), remove() freeing room,
// list() order, purpose filter, limit/has_more and `after`; shared content outliving a remove;
// with a state store: files, their order and the used bytes found again by a new store, a
// deleted file's bytes kept while pinned (also across a restart) and dropped once unpinned, a
// damaged file left out, a failed write refused with 500.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "server/file_store.h"
#include "support/test_support.h"

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

// A FileStore attached to a state store in `dir` (both closed when it goes).
class DurableFiles {
 public:
  explicit DurableFiles(const std::string& dir) {
    Result<std::unique_ptr<state::StateStore>> s = state::StateStore::open(&fs_, dir);
    EXPECT_TRUE(s.ok()) << s.status().message();
    state_ = std::move(*s);
    const Status st = files.attach(state_.get());
    EXPECT_TRUE(st.ok()) << st.message();
  }
  PosixFileSystem fs_;
  std::unique_ptr<state::StateStore> state_;
  FileStore files{1000, 100'000};
};

TEST(FileStoreTest, FilesSurviveInTheStateStore) {
  const std::string dir = testing::make_temp_dir("file_store");
  {
    DurableFiles d(dir);
    for (const char* id : {"file-a", "file-b", "file-c"}) {
      ASSERT_TRUE(d.files.add(id, "batch", std::string(id) + ".jsonl", id, true).ok());
    }
    EXPECT_TRUE(d.files.remove("file-b"));
  }
  DurableFiles d(dir);
  const FileStore::Page page = d.files.list("", 10, "", true);
  ASSERT_EQ(page.files.size(), 2u);
  EXPECT_EQ(page.files[0].id, "file-a");
  EXPECT_EQ(page.files[1].id, "file-c");
  EXPECT_EQ(*page.files[1].content, "file-c");
  EXPECT_EQ(page.files[1].filename, "file-c.jsonl");
  EXPECT_EQ(d.files.used_bytes(), 2 * (6 + kFileOverheadBytes));
  ASSERT_TRUE(d.files.add("file-d", "batch", "d", "d", true).ok());  // after the loaded ones
  EXPECT_EQ(d.files.list("", 10, "", false).files.front().id, "file-d");
  EXPECT_FALSE(std::filesystem::exists(dir + "/files/file-b.blob"));
}

TEST(FileStoreTest, PinnedBytesOutliveADeleteAndARestart) {
  const std::string dir = testing::make_temp_dir("file_store");
  {
    DurableFiles d(dir);
    ASSERT_TRUE(d.files.add("file-in", "batch", "in", "input bytes", true).ok());
    ASSERT_TRUE(d.files.add("file-gone", "batch", "g", "gone", true).ok());
    ASSERT_NE(d.files.pin("file-in"), nullptr);
    ASSERT_NE(d.files.pin("file-gone"), nullptr);
    EXPECT_TRUE(d.files.remove("file-in"));
    EXPECT_TRUE(d.files.remove("file-gone"));
    EXPECT_FALSE(d.files.find("file-in"));
    EXPECT_EQ(*d.files.pin("file-in"), "input bytes");  // pinned twice now
    d.files.unpin("file-in");
    EXPECT_TRUE(std::filesystem::exists(dir + "/files/file-in.blob"));
  }  // the process stops with both pinned
  DurableFiles d(dir);
  EXPECT_FALSE(d.files.find("file-in"));
  std::shared_ptr<const std::string> kept = d.files.pin("file-in");  // a resumed batch
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(*kept, "input bytes");
  d.files.drop_unpinned_deleted();  // file-gone: nothing resumed needs it
  EXPECT_FALSE(std::filesystem::exists(dir + "/files/file-gone.blob"));
  EXPECT_EQ(d.files.pin("file-gone"), nullptr);
  EXPECT_TRUE(std::filesystem::exists(dir + "/files/file-in.blob"));
  d.files.unpin("file-in");  // the batch ended
  EXPECT_FALSE(std::filesystem::exists(dir + "/files/file-in.blob"));
  EXPECT_EQ(d.files.pin("file-in"), nullptr);
}

TEST(FileStoreTest, DamagedFileIsLeftOutAndFailedWriteRefused) {
  const std::string dir = testing::make_temp_dir("file_store");
  {
    DurableFiles d(dir);
    ASSERT_TRUE(d.files.add("file-ok", "batch", "a", "fine", true).ok());
    ASSERT_TRUE(d.files.add("file-bad", "batch", "b", "will be damaged", true).ok());
  }
  {
    std::fstream f(dir + "/files/file-bad.blob", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('!');
  }
  {
    DurableFiles d(dir);
    EXPECT_TRUE(d.files.find("file-ok"));
    EXPECT_FALSE(d.files.find("file-bad"));
    ASSERT_EQ(d.state_->damaged().size(), 1u);
    EXPECT_NE(d.state_->damaged()[0].reason.find("checksum"), std::string::npos);
    EXPECT_EQ(d.files.used_bytes(), 4 + kFileOverheadBytes);
  }
  // A collection directory that cannot be created: the upload is refused, nothing is charged.
  const std::string other = testing::make_temp_dir("file_store");
  DurableFiles d(other);
  std::ofstream(other + "/files") << "not a directory";
  ApiResult<StoredFile> r = d.files.add("file-x", "batch", "x", "bytes", true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().status, 500);
  EXPECT_EQ(r.error().code, "file_store_write_failed");
  EXPECT_EQ(d.files.used_bytes(), 0u);
  EXPECT_FALSE(d.files.find("file-x"));
}

}  // namespace
}  // namespace keel::server
