// DiskTier (T2) on the real file system in a scratch directory: round trips, restart persistence
// (index rebuilt, LRU order from write sequence), capacity, and damage between restarts — flipped
// payload or header bytes, truncation, a foreign identity, a misnamed file, a leftover temporary
// file: each is detected, counted and never served; a capacity below one block file refused at
// open; failed writes counted (and logged once per streak).
#include "kv/disk_tier.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "kv/block_file.h"
#include "support/test_support.h"

namespace keel::kv {
namespace {

constexpr size_t kDiskPayload = 96;
constexpr int64_t kFile = static_cast<int64_t>(kBlockFileHeaderBytes + kDiskPayload);

std::vector<std::byte> disk_payload(int seed) {
  std::vector<std::byte> p(kDiskPayload);
  for (size_t i = 0; i < p.size(); ++i)
    p[i] = static_cast<std::byte>(seed * 17 + static_cast<int>(i));
  return p;
}

BlockHash disk_key(uint64_t i) { return {i * 0x9e3779b97f4a7c15ull, i}; }

class DiskTierTest : public ::testing::Test {
 protected:
  std::unique_ptr<DiskTier> open(int64_t capacity = 8 * kFile, BlockHash identity = {7, 8}) {
    DiskTierConfig c;
    c.dir = dir_;
    c.capacity_bytes = capacity;
    c.identity = identity;
    c.payload_bytes = kDiskPayload;
    Result<std::unique_ptr<DiskTier>> t = DiskTier::open(&fs_, c);
    EXPECT_TRUE(t.ok()) << t.status().message();
    return t.ok() ? std::move(*t) : nullptr;
  }

  static void flip_byte(const std::string& path, std::streamoff offset) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << path;
    f.seekg(offset);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x40);
    f.seekp(offset);
    f.write(&c, 1);
  }

  PosixFileSystem fs_;
  std::string dir_ = testing::make_temp_dir("disk_tier");
};

TEST_F(DiskTierTest, RoundTripAndPersistenceAcrossRestart) {
  {
    auto tier = open();
    for (uint64_t i = 1; i <= 3; ++i)
      ASSERT_TRUE(tier->put(disk_key(i), disk_payload(static_cast<int>(i)), nullptr).ok());
    EXPECT_EQ(tier->stats().used_bytes, 3 * kFile);
    EXPECT_EQ(tier->name(), "disk");
  }
  auto tier = open();  // restart: the index comes back from the files
  EXPECT_EQ(tier->stats().blocks, 3);
  EXPECT_EQ(tier->stats().corrupt, 0);
  std::vector<std::byte> out(kDiskPayload);
  for (uint64_t i = 1; i <= 3; ++i) {
    ASSERT_TRUE(tier->get(disk_key(i), out).ok());
    EXPECT_EQ(out, disk_payload(static_cast<int>(i)));
  }
  EXPECT_EQ(tier->get(disk_key(9), out).code(), StatusCode::kNotFound);
  EXPECT_EQ(tier->stats().hits, 3);
  EXPECT_EQ(tier->stats().misses, 1);
}

TEST_F(DiskTierTest, CapacityEvictsOldestAndRestartKeepsWriteOrder) {
  {
    auto tier = open(3 * kFile);
    for (uint64_t i = 1; i <= 4; ++i)
      ASSERT_TRUE(tier->put(disk_key(i), disk_payload(static_cast<int>(i)), nullptr).ok());
    EXPECT_FALSE(tier->contains(disk_key(1)));
    EXPECT_FALSE(std::filesystem::exists(tier->path_of(disk_key(1))));
    EXPECT_EQ(tier->stats().evictions, 1);
  }
  auto tier = open(3 * kFile);
  ASSERT_TRUE(
      tier->put(disk_key(5), disk_payload(5), nullptr).ok());  // evicts the oldest write: key 2
  EXPECT_FALSE(tier->contains(disk_key(2)));
  EXPECT_TRUE(tier->contains(disk_key(3)));
  EXPECT_LE(tier->stats().used_bytes, 3 * kFile);
  auto smaller = open(kFile);  // reopening with less capacity trims to it
  EXPECT_EQ(smaller->stats().blocks, 1);
  EXPECT_TRUE(smaller->contains(disk_key(5)));
}

TEST_F(DiskTierTest, FlippedPayloadByteIsDetectedOnReadAndNeverServed) {
  std::string path;
  {
    auto tier = open();
    ASSERT_TRUE(tier->put(disk_key(1), disk_payload(1), nullptr).ok());
    path = tier->path_of(disk_key(1));
  }
  flip_byte(path, static_cast<std::streamoff>(kBlockFileHeaderBytes + 10));
  auto tier = open();
  ASSERT_TRUE(tier->contains(disk_key(1)));  // the header is intact: found at open
  std::vector<std::byte> out(kDiskPayload);
  EXPECT_EQ(tier->get(disk_key(1), out).code(), StatusCode::kCorrupt);
  EXPECT_FALSE(tier->contains(disk_key(1)));
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(tier->stats().corrupt, 1);
  EXPECT_EQ(tier->stats().hits, 0);
}

TEST_F(DiskTierTest, DamagedHeaderTruncationAndForeignFilesAreSkippedAtOpen) {
  std::string dir;
  {
    auto tier = open();
    for (uint64_t i = 1; i <= 4; ++i)
      ASSERT_TRUE(tier->put(disk_key(i), disk_payload(static_cast<int>(i)), nullptr).ok());
    dir = tier->directory();
    flip_byte(tier->path_of(disk_key(1)), 20);                            // header: identity
    std::filesystem::resize_file(tier->path_of(disk_key(2)), kFile - 7);  // truncated
    std::filesystem::rename(tier->path_of(disk_key(3)), tier->path_of(disk_key(33)));  // misnamed
  }
  // A file of another model, copied into this store's directory under a valid name.
  {
    auto other = open(8 * kFile, BlockHash{1, 2});
    ASSERT_TRUE(other->put(disk_key(5), disk_payload(5), nullptr).ok());
    std::filesystem::copy_file(other->path_of(disk_key(5)),
                               dir + "/" + block_hash_hex(disk_key(5)) + ".kvb");
  }
  std::ofstream(dir + "/" + block_hash_hex(disk_key(6)) + ".kvb.tmp") << "partial";
  auto tier = open();
  EXPECT_EQ(tier->stats().blocks, 1);  // only key 4 survives
  EXPECT_TRUE(tier->contains(disk_key(4)));
  EXPECT_EQ(tier->stats().corrupt, 4);  // header, truncation, misnamed, foreign
  EXPECT_FALSE(std::filesystem::exists(dir + "/" + block_hash_hex(disk_key(6)) + ".kvb.tmp"));
  std::vector<std::byte> out(kDiskPayload);
  for (uint64_t i : {1, 2, 3, 33, 5})
    EXPECT_EQ(tier->get(disk_key(i), out).code(), StatusCode::kNotFound);
}

TEST_F(DiskTierTest, AnotherIdentityNeverSeesTheFiles) {
  {
    auto tier = open();
    ASSERT_TRUE(tier->put(disk_key(1), disk_payload(1), nullptr).ok());
  }
  auto other = open(8 * kFile, BlockHash{7, 9});
  EXPECT_EQ(other->stats().blocks, 0);
  EXPECT_FALSE(other->contains(disk_key(1)));
  auto same = open();  // the first identity's files are untouched
  EXPECT_TRUE(same->contains(disk_key(1)));
}

TEST_F(DiskTierTest, RejectsWrongSizesAndTooSmallCapacity) {
  auto tier = open();
  EXPECT_EQ(tier->put(disk_key(1), std::vector<std::byte>(kDiskPayload - 1), nullptr).code(),
            StatusCode::kInvalidArgument);
  // A capacity that cannot hold one block file is refused at open, naming the flag.
  DiskTierConfig c;
  c.dir = dir_;
  c.capacity_bytes = kFile - 1;
  c.identity = {7, 8};
  c.payload_bytes = kDiskPayload;
  Result<std::unique_ptr<DiskTier>> tiny = DiskTier::open(&fs_, c);
  ASSERT_FALSE(tiny.ok());
  EXPECT_EQ(tiny.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tiny.status().message().find("--kv-disk-bytes"), std::string::npos);
  c.capacity_bytes = kFile;  // exactly one block file is enough
  EXPECT_TRUE(DiskTier::open(&fs_, c).ok());
}

// The real file system, except that writes fail while `broken` (root ignores permissions, so a
// read-only directory cannot stand in for this in tests).
class BreakableFileSystem final : public FileSystem {
 public:
  Result<std::unique_ptr<RandomAccessFile>> open_readable(const std::string& path) override {
    return base_.open_readable(path);
  }
  Result<std::unique_ptr<WritableFile>> open_writable(const std::string& path) override {
    if (broken) return Status::io_error(path + ": Permission denied");
    return base_.open_writable(path);
  }
  bool exists(const std::string& path) override { return base_.exists(path); }
  Status create_directories(const std::string& path) override {
    return base_.create_directories(path);
  }
  Status rename(const std::string& from, const std::string& to) override {
    return base_.rename(from, to);
  }
  Status remove(const std::string& path) override { return base_.remove(path); }
  Result<std::vector<std::string>> list_directory(const std::string& dir) override {
    return base_.list_directory(dir);
  }
  bool broken = false;

 private:
  PosixFileSystem base_;
};

TEST_F(DiskTierTest, FailedWritesAreCountedAndTheTierRecovers) {
  BreakableFileSystem fs;
  DiskTierConfig c;
  c.dir = dir_;
  c.capacity_bytes = 8 * kFile;
  c.identity = {7, 8};
  c.payload_bytes = kDiskPayload;
  auto tier = DiskTier::open(&fs, c);
  ASSERT_TRUE(tier.ok());
  ASSERT_TRUE((*tier)->put(disk_key(1), disk_payload(1), nullptr).ok());
  fs.broken = true;  // the directory became unwritable
  for (uint64_t i = 2; i <= 4; ++i) {
    EXPECT_EQ((*tier)->put(disk_key(i), disk_payload(static_cast<int>(i)), nullptr).code(),
              StatusCode::kIoError);
  }
  TierStats s = (*tier)->stats();
  EXPECT_EQ(s.write_errors, 3);
  EXPECT_EQ(s.blocks, 1);
  EXPECT_EQ(s.used_bytes, kFile);  // the failed writes' reservations were returned
  fs.broken = false;
  ASSERT_TRUE((*tier)->put(disk_key(5), disk_payload(5), nullptr).ok());
  s = (*tier)->stats();
  EXPECT_EQ(s.write_errors, 3);
  EXPECT_EQ(s.blocks, 2);
}

TEST(BlockFileTest, HeaderRoundTripAndChecksum) {
  BlockFileHeader h;
  h.identity = {1, 2};
  h.key = {3, 4};
  h.payload_bytes = 96;
  h.payload_checksum = 0x1234;
  h.sequence = 77;
  std::vector<std::byte> bytes = encode_block_file_header(h);
  ASSERT_EQ(bytes.size(), kBlockFileHeaderBytes);
  Result<BlockFileHeader> back = decode_block_file_header(bytes, "x");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->identity, h.identity);
  EXPECT_EQ(back->key, h.key);
  EXPECT_EQ(back->payload_bytes, 96u);
  EXPECT_EQ(back->sequence, 77u);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::vector<std::byte> bad = bytes;
    bad[i] ^= std::byte{1};
    EXPECT_EQ(decode_block_file_header(bad, "x").status().code(), StatusCode::kCorrupt) << i;
  }
  EXPECT_EQ(block_hash_hex({0x1, 0xabc}), "0000000000000abc0000000000000001");
}

}  // namespace
}  // namespace keel::kv
