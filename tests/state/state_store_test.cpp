// StateStore on the real file system in a scratch directory, wrapped by a fault-injecting file
// system: records, blobs and logs survive reopening; a write that fails at any step (a torn
// write, fsync, rename, the directory's fsync) leaves the old entry or the new one, never a mix
// and no temporary file; a damaged or truncated entry is set aside (moved to damaged/, listed,
// never returned); a log's torn tail is dropped and later appends follow its intact prefix; a
// second open of a locked directory is refused with a message naming it.
#include "state/state_store.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "state/entry_format.h"
#include "support/test_support.h"

namespace keel::state {
namespace {

using nlohmann::json;

// Injected faults; each one-shot fault fires once, on the next matching call.
struct Faults {
  int64_t torn_write_bytes = -1;  // the next file written takes this many bytes, then fails
  bool fail_sync = false;
  bool fail_rename = false;
  bool fail_sync_directory = false;
};

class FaultWritableFile final : public WritableFile {
 public:
  FaultWritableFile(std::unique_ptr<WritableFile> base, Faults* faults)
      : base_(std::move(base)), faults_(faults) {}
  Status append(std::span<const std::byte> data) override {
    if (faults_->torn_write_bytes >= 0) {
      const size_t n = std::min(data.size(), static_cast<size_t>(faults_->torn_write_bytes));
      faults_->torn_write_bytes = -1;
      KEEL_TRY(base_->append(data.first(n)));
      return Status::io_error("injected: write failed after " + std::to_string(n) + " bytes");
    }
    return base_->append(data);
  }
  Status sync() override {
    if (std::exchange(faults_->fail_sync, false)) return Status::io_error("injected: fsync");
    return base_->sync();
  }
  Status close() override { return base_->close(); }

 private:
  std::unique_ptr<WritableFile> base_;
  Faults* faults_;
};

class FaultFileSystem final : public FileSystem {
 public:
  Faults faults;

  Result<std::unique_ptr<RandomAccessFile>> open_readable(const std::string& path) override {
    return base_.open_readable(path);
  }
  Result<std::unique_ptr<WritableFile>> open_writable(const std::string& path) override {
    KEEL_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, base_.open_writable(path));
    return std::unique_ptr<WritableFile>(new FaultWritableFile(std::move(f), &faults));
  }
  Result<std::unique_ptr<WritableFile>> open_appendable(const std::string& path) override {
    KEEL_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, base_.open_appendable(path));
    return std::unique_ptr<WritableFile>(new FaultWritableFile(std::move(f), &faults));
  }
  bool exists(const std::string& path) override { return base_.exists(path); }
  Status create_directories(const std::string& path) override {
    return base_.create_directories(path);
  }
  Status rename(const std::string& from, const std::string& to) override {
    if (std::exchange(faults.fail_rename, false)) return Status::io_error("injected: rename");
    return base_.rename(from, to);
  }
  Status remove(const std::string& path) override { return base_.remove(path); }
  Result<std::vector<std::string>> list_directory(const std::string& dir) override {
    return base_.list_directory(dir);
  }
  Status sync_directory(const std::string& dir) override {
    if (std::exchange(faults.fail_sync_directory, false)) {
      return Status::io_error("injected: directory fsync");
    }
    return base_.sync_directory(dir);
  }
  Result<std::unique_ptr<FileLock>> lock_file(const std::string& path) override {
    return base_.lock_file(path);
  }

 private:
  PosixFileSystem base_;
};

// The value of `r`, failing the test (and returning T{}) when it is an error.
template <typename T>
T must(Result<T> r) {
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? std::move(*r) : T{};
}

class StateStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<StateStore> open() {
    Result<std::unique_ptr<StateStore>> s = StateStore::open(&fs_, dir_);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(*s) : nullptr;
  }
  // The record values of `collection`, by id.
  static std::map<std::string, json> records(StateStore& s, const std::string& collection) {
    std::map<std::string, json> out;
    for (Record& rec : must(s.load_records(collection))) out[rec.id] = std::move(rec.value);
    return out;
  }
  std::set<std::string> files_in(const std::string& sub) const {
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir_ + "/" + sub)) {
      names.insert(e.path().filename().string());
    }
    return names;
  }
  void write_raw(const std::string& path, const std::string& bytes, bool append = false) const {
    std::ofstream f(path, std::ios::binary | (append ? std::ios::app : std::ios::trunc));
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(f.good()) << path;
  }

  FaultFileSystem fs_;
  std::string dir_ = testing::make_temp_dir("state_store");
};

TEST_F(StateStoreTest, RecordsBlobsAndLogsSurviveReopening) {
  {
    auto s = open();
    ASSERT_TRUE(s->put_record("batches", "batch_1", {{"status", "in_progress"}}).ok());
    ASSERT_TRUE(s->put_record("batches", "batch_2", {{"status", "completed"}}).ok());
    ASSERT_TRUE(s->put_record("batches", "batch_2", {{"status", "cancelled"}}).ok());  // replaced
    ASSERT_TRUE(s->put_blob("files", "file-a", std::string("line 1\nline 2\n")).ok());
    ASSERT_TRUE(s->put_blob("files", "file-b", std::string()).ok());
    for (const char* e : {"first", "second", "third"})
      ASSERT_TRUE(s->append("batches", "batch_1", e).ok());
  }
  auto s = open();
  const auto recs = records(*s, "batches");
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs.at("batch_1")["status"], "in_progress");
  EXPECT_EQ(recs.at("batch_2")["status"], "cancelled");
  EXPECT_EQ(must(s->read_blob("files", "file-a")), "line 1\nline 2\n");
  EXPECT_EQ(must(s->read_blob("files", "file-b")), "");
  Result<std::vector<std::string>> ids = s->list_blobs("files");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(std::set<std::string>(ids->begin(), ids->end()),
            (std::set<std::string>{"file-a", "file-b"}));
  EXPECT_EQ(must(s->read_log("batches", "batch_1")),
            (std::vector<std::string>{"first", "second", "third"}));
  EXPECT_TRUE(records(*s, "nothing_here").empty());
  EXPECT_TRUE(must(s->read_log("batches", "batch_9")).empty());
  EXPECT_EQ(s->read_blob("files", "file-z").status().code(), StatusCode::kNotFound);

  ASSERT_TRUE(s->remove_record("batches", "batch_2").ok());
  ASSERT_TRUE(s->remove_record("batches", "batch_2").ok());  // absent: still ok
  ASSERT_TRUE(s->remove_blob("files", "file-b").ok());
  ASSERT_TRUE(s->remove_log("batches", "batch_1").ok());
  EXPECT_EQ(records(*s, "batches").size(), 1u);
  EXPECT_EQ(files_in("files"), (std::set<std::string>{"file-a.blob"}));
  EXPECT_TRUE(s->damaged().empty());
}

TEST_F(StateStoreTest, FailedWriteAtAnyStepLeavesTheOldOrTheNewRecord) {
  auto s = open();
  const json old_value = {{"v", "old"}, {"pad", std::string(300, 'o')}};
  const json new_value = {{"v", "new"}, {"pad", std::string(300, 'n')}};
  struct Case {
    const char* name;
    void (*arm)(Faults&);
    const char* expect;  // the value after the failed write
  };
  const Case cases[] = {
      {"torn write", [](Faults& f) { f.torn_write_bytes = 40; }, "old"},
      {"fsync", [](Faults& f) { f.fail_sync = true; }, "old"},
      {"rename", [](Faults& f) { f.fail_rename = true; }, "old"},
      // Renamed already: the new record is whole; only its durability was not confirmed.
      {"directory fsync", [](Faults& f) { f.fail_sync_directory = true; }, "new"},
  };
  for (const Case& c : cases) {
    ASSERT_TRUE(s->put_record("jobs", "job-1", old_value).ok()) << c.name;
    c.arm(fs_.faults);
    const Status st = s->put_record("jobs", "job-1", new_value);
    EXPECT_FALSE(st.ok()) << c.name;
    EXPECT_NE(st.message().find("injected"), std::string_view::npos) << c.name;
    EXPECT_EQ(files_in("jobs"), (std::set<std::string>{"job-1.rec"})) << c.name;
    auto reopened = records(*s, "jobs");
    EXPECT_EQ(reopened.at("job-1")["v"], c.expect) << c.name;
  }
  EXPECT_TRUE(s->damaged().empty());
}

TEST_F(StateStoreTest, TemporaryFileOfAnEarlierProcessIsRemoved) {
  {
    auto s = open();
    ASSERT_TRUE(s->put_record("jobs", "job-1", {{"v", 1}}).ok());
  }
  // A process killed between writing its temporary file and renaming it.
  write_raw(dir_ + "/jobs/job-1.rec.tmp.00000000deadbeef.7", "half a reco");
  auto s = open();
  const auto recs = records(*s, "jobs");
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs.at("job-1")["v"], 1);
  EXPECT_EQ(files_in("jobs"), (std::set<std::string>{"job-1.rec"}));
}

TEST_F(StateStoreTest, DamagedRecordsAreSetAsideAndNamed) {
  {
    auto s = open();
    for (const char* id : {"good", "flipped", "truncated", "not-json"}) {
      ASSERT_TRUE(s->put_record("jobs", id, {{"id", id}, {"pad", std::string(64, 'x')}}).ok());
    }
  }
  const std::string jobs = dir_ + "/jobs/";
  std::string bytes = testing::read_file(jobs + "flipped.rec");
  bytes[bytes.size() - 5] ^= 0x20;
  write_raw(jobs + "flipped.rec", bytes);
  bytes = testing::read_file(jobs + "truncated.rec");
  write_raw(jobs + "truncated.rec", bytes.substr(0, bytes.size() - 10));
  const std::string text = "{\"id\": unterminated";
  write_raw(jobs + "not-json.rec", encode_entry_header(text) + text);

  auto s = open();
  const auto recs = records(*s, "jobs");
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs.at("good")["id"], "good");
  const std::vector<DamagedEntry> damaged = s->damaged();
  ASSERT_EQ(damaged.size(), 3u);
  std::map<std::string, DamagedEntry> by_file;
  for (const DamagedEntry& d : damaged) by_file[std::filesystem::path(d.path).filename()] = d;
  EXPECT_NE(by_file.at("flipped.rec").reason.find("payload checksum mismatch"), std::string::npos);
  EXPECT_NE(by_file.at("truncated.rec").reason.find("truncated"), std::string::npos);
  EXPECT_EQ(by_file.at("not-json.rec").reason, "not JSON");
  for (const DamagedEntry& d : damaged) {
    EXPECT_TRUE(std::filesystem::exists(d.moved_to)) << d.moved_to;  // kept for inspection
    EXPECT_EQ(std::filesystem::path(d.moved_to).parent_path(), dir_ + "/damaged");
  }
  EXPECT_EQ(files_in("jobs"), (std::set<std::string>{"good.rec"}));
  EXPECT_TRUE(records(*s, "jobs").size() == 1u && s->damaged().size() == 3u);  // not reported twice
}

TEST_F(StateStoreTest, TruncatedBlobIsCorruptAndSetAside) {
  {
    auto s = open();
    ASSERT_TRUE(s->put_blob("files", "file-1", std::string(1000, 'b')).ok());
  }
  const std::string path = dir_ + "/files/file-1.blob";
  write_raw(path, testing::read_file(path).substr(0, 500));
  auto s = open();
  Result<std::string> r = s->read_blob("files", "file-1");
  ASSERT_EQ(r.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(r.status().message().find("file-1.blob: truncated: 468 of 1000"),
            std::string_view::npos)
      << r.status().message();
  EXPECT_FALSE(std::filesystem::exists(path));
  ASSERT_EQ(s->damaged().size(), 1u);
  EXPECT_TRUE(std::filesystem::exists(s->damaged()[0].moved_to));
}

TEST_F(StateStoreTest, TornLogTailIsDroppedAndAppendsContinueAfterTheIntactPrefix) {
  {
    auto s = open();
    for (const char* e : {"line 0", "line 1", "line 2"}) ASSERT_TRUE(s->append("b", "log", e).ok());
  }
  // Killed in the middle of its fourth append.
  const std::string frame = encode_frame("line 3");
  write_raw(dir_ + "/b/log.log", frame.substr(0, frame.size() - 2), /*append=*/true);
  {
    auto s = open();
    // The first append after a restart checks the log first.
    ASSERT_TRUE(s->append("b", "log", "line 3 again").ok());
    EXPECT_EQ(must(s->read_log("b", "log")),
              (std::vector<std::string>{"line 0", "line 1", "line 2", "line 3 again"}));
    ASSERT_EQ(s->damaged().size(), 1u);
    EXPECT_NE(s->damaged()[0].reason.find("cut short"), std::string::npos);
    EXPECT_EQ(testing::read_file(s->damaged()[0].moved_to).size(),
              3 * encode_frame("line 0").size() + frame.size() - 2);  // the original, whole
  }
  auto s = open();
  EXPECT_EQ(must(s->read_log("b", "log")).size(), 4u);
  EXPECT_TRUE(s->damaged().empty());
}

TEST_F(StateStoreTest, FailedAppendLeavesNoGarbageBeforeTheNextEntry) {
  auto s = open();
  ASSERT_TRUE(s->append("b", "log", "one").ok());
  fs_.faults.torn_write_bytes = 7;  // part of the frame reaches the file
  EXPECT_FALSE(s->append("b", "log", "two").ok());
  ASSERT_TRUE(s->append("b", "log", "three").ok());
  fs_.faults.fail_sync = true;  // the whole frame is written but not confirmed durable
  EXPECT_FALSE(s->append("b", "log", "four").ok());
  ASSERT_TRUE(s->append("b", "log", "five").ok());
  // "four" is whole on disk: a reader of the log sees it (callers key entries, e.g. by line).
  EXPECT_EQ(must(s->read_log("b", "log")),
            (std::vector<std::string>{"one", "three", "four", "five"}));
}

TEST_F(StateStoreTest, SecondOpenOfALockedDirectoryIsRefused) {
  auto first = open();
  Result<std::unique_ptr<StateStore>> second = StateStore::open(&fs_, dir_);
  ASSERT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      second.status().message(),
      "state directory " + dir_ + " is in use by another process (it holds " + dir_ + "/LOCK)");
  first.reset();
  EXPECT_TRUE(StateStore::open(&fs_, dir_).ok());
}

TEST_F(StateStoreTest, BadNamesAreRefused) {
  auto s = open();
  for (const char* id : {"", "../etc", ".hidden", "a/b", "sp ace"}) {
    EXPECT_EQ(s->put_record("jobs", id, json::object()).code(), StatusCode::kInvalidArgument) << id;
  }
  EXPECT_EQ(s->put_blob("a/b", "x", "").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->put_record("jobs", std::string(129, 'a'), json::object()).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(s->put_record("jobs", std::string(128, 'a'), json::object()).ok());
}

}  // namespace
}  // namespace keel::state
