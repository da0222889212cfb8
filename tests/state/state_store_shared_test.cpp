// StateStore opened shared (open_shared: no lock), as the gateways of a cluster use one
// --responses-dir: two stores on one directory see each other's records and removals; another
// process's temporary file is left alone (it may be mid-write); a damaged record read by id is
// Corrupt naming why and set aside; two writers of one record and a reader at once — every read
// is one whole record of one writer, never a mix, and the directory ends with one of the two.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "state/state_store.h"
#include "support/test_support.h"

namespace keel::state {
namespace {

using nlohmann::json;

class SharedStateStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<StateStore> open_shared() {
    Result<std::unique_ptr<StateStore>> s = StateStore::open_shared(&fs_, dir_);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(*s) : nullptr;
  }
  void write_raw(const std::string& path, const std::string& bytes) const {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(f.good()) << path;
  }

  PosixFileSystem fs_;
  std::string dir_ = testing::make_temp_dir("state_shared");
};

TEST_F(SharedStateStoreTest, TwoStoresOnOneDirectorySeeEachOthersRecords) {
  auto a = open_shared();
  auto b = open_shared();  // no lock: a second holder is fine
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(a->shared());
  EXPECT_EQ(b->read_record("r", "x").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(b->has_record("r", "x"));
  ASSERT_TRUE(a->put_record("r", "x", {{"v", 1}}).ok());
  EXPECT_TRUE(b->has_record("r", "x"));
  Result<json> got = b->read_record("r", "x");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ((*got)["v"], 1);
  ASSERT_TRUE(b->put_record("r", "x", {{"v", 2}}).ok());
  EXPECT_EQ((*a->read_record("r", "x"))["v"], 2);
  ASSERT_TRUE(b->remove_record("r", "x").ok());
  EXPECT_FALSE(a->has_record("r", "x"));
  EXPECT_EQ(a->read_record("r", "x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(a->read_record("r", "../x").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SharedStateStoreTest, AnotherProcesssTemporaryFileIsLeftAlone) {
  auto a = open_shared();
  ASSERT_TRUE(a->put_record("r", "x", {{"v", 1}}).ok());
  const std::string tmp = dir_ + "/r/y.rec.tmp.00000000deadbeef.3";  // another writer's, mid-write
  write_raw(tmp, "half a rec");
  auto b = open_shared();
  Result<std::vector<Record>> recs = b->load_records("r");
  ASSERT_TRUE(recs.ok());
  ASSERT_EQ(recs->size(), 1u);
  EXPECT_EQ(recs->front().id, "x");
  EXPECT_TRUE(std::filesystem::exists(tmp));
}

TEST_F(SharedStateStoreTest, ADamagedRecordIsCorruptNamingWhyAndSetAside) {
  auto a = open_shared();
  ASSERT_TRUE(a->put_record("r", "x", {{"pad", std::string(64, 'x')}}).ok());
  std::string bytes = testing::read_file(dir_ + "/r/x.rec");
  bytes[bytes.size() - 5] ^= 0x20;
  write_raw(dir_ + "/r/x.rec", bytes);
  auto b = open_shared();
  Result<json> got = b->read_record("r", "x");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(got.status().message().find("x.rec"), std::string::npos) << got.status().message();
  EXPECT_NE(got.status().message().find("checksum"), std::string::npos) << got.status().message();
  ASSERT_EQ(b->damaged().size(), 1u);
  EXPECT_TRUE(std::filesystem::exists(b->damaged()[0].moved_to));
  EXPECT_EQ(a->read_record("r", "x").status().code(), StatusCode::kNotFound);
}

TEST_F(SharedStateStoreTest, TwoWritersOfOneRecordNeverLeaveAMix) {
  auto a = open_shared();
  auto b = open_shared();
  auto reader = open_shared();
  constexpr int kWrites = 40;
  const std::string pad(4096, 'p');  // several pages: a torn record would show
  ASSERT_TRUE(a->put_record("r", "x", {{"writer", "a"}, {"n", -1}, {"pad", pad}}).ok());
  std::atomic<bool> done{false};
  std::atomic<int> bad{0}, reads{0};
  std::thread r([&] {
    while (!done.load()) {
      Result<json> got = reader->read_record("r", "x");
      const bool whole =
          got.ok() && (*got)["pad"] == pad && ((*got)["writer"] == "a" || (*got)["writer"] == "b");
      if (!whole) bad.fetch_add(1);
      reads.fetch_add(1);
    }
  });
  auto write = [&](StateStore* s, const char* who) {
    for (int n = 0; n < kWrites; ++n) {
      EXPECT_TRUE(s->put_record("r", "x", {{"writer", who}, {"n", n}, {"pad", pad}}).ok());
    }
  };
  std::thread wa(write, a.get(), "a");
  std::thread wb(write, b.get(), "b");
  wa.join();
  wb.join();
  done.store(true);
  r.join();
  EXPECT_EQ(bad.load(), 0) << "of " << reads.load() << " reads";
  EXPECT_GT(reads.load(), 0);
  Result<json> last = reader->read_record("r", "x");
  ASSERT_TRUE(last.ok());
  EXPECT_EQ((*last)["n"], kWrites - 1);
  EXPECT_TRUE(reader->damaged().empty());
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir_ + "/r")) ++files;
  EXPECT_EQ(files, 1u);  // no temporary file left behind
}

}  // namespace
}  // namespace keel::state
