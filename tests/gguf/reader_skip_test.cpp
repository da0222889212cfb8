// ReadOptions::skip and the ByteRange set operations behind it: skipped bytes stay zero and are
// never read (the file system sees fewer bytes), the rest equals a full read, ranges may come
// unsorted and overlapping, progress counts only what is read, a range outside the data section
// is an error, kMmap ignores the option, and the skipped pages of a large buffer never become
// resident.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/file_system.h"
#include "gguf/byte_ranges.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "gguf_test_util.h"
#include "support/test_support.h"
#include "test_file_systems.h"

namespace keel::gguf {
namespace {

using test_util::fails_with;

TEST(ByteRangesTest, NormalizeSortsMergesAndDropsEmpty) {
  EXPECT_EQ(normalize_ranges({{50, 10}, {0, 5}, {3, 4}, {7, 0}, {60, 2}, {40, 1}}),
            (std::vector<ByteRange>{{0, 7}, {40, 1}, {50, 12}}));
  EXPECT_TRUE(normalize_ranges({{9, 0}}).empty());
}

TEST(ByteRangesTest, SubtractAndComplement) {
  EXPECT_EQ(subtract_ranges({{0, 100}}, {{10, 10}, {15, 10}, {90, 20}}),
            (std::vector<ByteRange>{{0, 10}, {25, 65}}));
  EXPECT_EQ(subtract_ranges({{0, 10}, {20, 10}}, {{5, 20}}),
            (std::vector<ByteRange>{{0, 5}, {25, 5}}));
  EXPECT_TRUE(subtract_ranges({{4, 4}}, {{0, 100}}).empty());
  EXPECT_EQ(complement_ranges({{0, 3}, {8, 2}}, 10), (std::vector<ByteRange>{{3, 5}}));
  EXPECT_EQ(complement_ranges({}, 10), (std::vector<ByteRange>{{0, 10}}));
  EXPECT_TRUE(complement_ranges({}, 0).empty());
  EXPECT_EQ(total_bytes({{0, 3}, {8, 2}}), 5u);
}

// Tensors "a" (F32, 300000 values: a data section over the 2 MiB a buffer maps anonymously) and
// "b", "c" (F32, 1000 values), every value non-zero.
std::string write_three(const std::string& dir) {
  GgufWriter w;
  w.set("general.architecture", "llama");
  std::vector<float> a(300000), b(1000), c(1000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i + 1);
  for (size_t i = 0; i < b.size(); ++i) b[i] = -static_cast<float>(i + 1), c[i] = 0.5f + i;
  EXPECT_TRUE(w.add_tensor("a", DType::kF32, {300000}, std::as_bytes(std::span(a))).ok());
  EXPECT_TRUE(w.add_tensor("b", DType::kF32, {1000}, std::as_bytes(std::span(b))).ok());
  EXPECT_TRUE(w.add_tensor("c", DType::kF32, {1000}, std::as_bytes(std::span(c))).ok());
  const std::string path = dir + "/three.gguf";
  EXPECT_TRUE(w.write(path).ok());
  return path;
}

// All of the data section, through tensor_data() of a whole-section view.
std::span<const std::byte> section(const GgufFile& f) {
  TensorInfo all;
  all.offset = 0;
  all.num_bytes = f.file_size() - f.data_offset();
  return f.tensor_data(all);
}

bool all_zero(std::span<const std::byte> s) {
  for (std::byte b : s) {
    if (b != std::byte{0}) return false;
  }
  return true;
}

TEST(GgufSkipTest, SkippedBytesStayZeroAndAreNotRead) {
  const std::string path = write_three(keel::testing::make_temp_dir("gguf-skip"));
  PosixFileSystem posix;
  test_util::FaultFileSystem full_fs(&posix, {}), part_fs(&posix, {});
  auto full = GgufFile::open(path, {.fs = &full_fs});
  ASSERT_TRUE(full.ok()) << full.error().to_string();
  const TensorInfo& a = *full->find_tensor("a");
  const TensorInfo& b = *full->find_tensor("b");
  // Unsorted, overlapping: the tail of a from byte 4096 and all of b; an empty range too.
  const std::vector<ByteRange> ranges = {
      {b.offset, b.num_bytes}, {a.offset + 4096, a.num_bytes - 4096}, {b.offset + 8, 16}, {5, 0}};
  std::vector<std::string> names;
  uint64_t last_done = 0, last_total = 0;
  ReadOptions opts;
  opts.fs = &part_fs;
  opts.skip = [&](const std::vector<TensorInfo>& tensors) {
    for (const TensorInfo& t : tensors) names.push_back(t.name);
    return ranges;
  };
  opts.progress = [&](uint64_t done, uint64_t total) { last_done = done, last_total = total; };
  auto part = GgufFile::open(path, opts);
  ASSERT_TRUE(part.ok()) << part.error().to_string();
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c"}));

  const std::vector<ByteRange> skipped = normalize_ranges(ranges);
  const uint64_t data_size = full->file_size() - full->data_offset();
  EXPECT_EQ(last_total, data_size - total_bytes(skipped));
  EXPECT_EQ(last_done, last_total);
  EXPECT_EQ(full_fs.bytes_read() - part_fs.bytes_read(), total_bytes(skipped));

  const auto want = section(*full), got = section(*part);
  for (const ByteRange& r : complement_ranges(skipped, data_size)) {
    EXPECT_EQ(0, std::memcmp(want.data() + r.offset, got.data() + r.offset, r.bytes));
  }
  for (const ByteRange& r : skipped) {
    EXPECT_TRUE(all_zero(got.subspan(r.offset, r.bytes))) << r.offset;
    EXPECT_FALSE(all_zero(want.subspan(r.offset, r.bytes))) << r.offset;
  }
  const TensorInfo& c = *part->find_tensor("c");
  EXPECT_EQ(0, std::memcmp(part->tensor_data(c).data(), full->tensor_data(c).data(), c.num_bytes));
}

TEST(GgufSkipTest, RangesOutsideTheDataSectionAreErrors) {
  const std::string path = write_three(keel::testing::make_temp_dir("gguf-skip"));
  auto f = GgufFile::open(path, {.mode = DataMode::kNone});
  ASSERT_TRUE(f.ok());
  const uint64_t data_size = f->file_size() - f->data_offset();
  for (const ByteRange r :
       {ByteRange{data_size - 4, 8}, ByteRange{data_size + 1, 0}, ByteRange{8, ~uint64_t{0}}}) {
    ReadOptions opts;
    opts.skip = [r](const std::vector<TensorInfo>&) { return std::vector<ByteRange>{r}; };
    EXPECT_TRUE(fails_with(GgufFile::open(path, opts), StatusCode::kInvalidArgument, path,
                           "lies outside the " + std::to_string(data_size) + "-byte data section"));
  }
  ReadOptions whole;  // a range that ends the section exactly is fine
  whole.skip = [&](const std::vector<TensorInfo>&) {
    return std::vector<ByteRange>{{0, data_size}};
  };
  auto none = GgufFile::open(path, whole);
  ASSERT_TRUE(none.ok()) << none.error().to_string();
  EXPECT_TRUE(all_zero(section(*none)));
}

TEST(GgufSkipTest, MappedFilesIgnoreTheOption) {
  const std::string path = write_three(keel::testing::make_temp_dir("gguf-skip"));
  bool called = false;
  ReadOptions opts;
  opts.mode = DataMode::kMmap;
  opts.skip = [&](const std::vector<TensorInfo>& t) {
    called = true;
    return std::vector<ByteRange>{{0, t[0].num_bytes}};
  };
  auto f = GgufFile::open(path, opts);
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  EXPECT_FALSE(called);
  EXPECT_FALSE(all_zero(f->tensor_data(*f->find_tensor("a"))));
}

// A data section of 2 MiB or more is an anonymous mapping: the pages of a skipped range are never
// touched, so never resident (checked with mincore over whole 2 MiB huge pages inside the range,
// which no read comes near).
TEST(GgufSkipTest, SkippedPagesOfALargeBufferAreNeverResident) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  GgufWriter w;
  w.set("general.architecture", "llama");
  std::vector<float> big(3 * kMiB, 1.5f);  // 12 MiB
  ASSERT_TRUE(
      w.add_tensor("big", DType::kF32, {int64_t(big.size())}, std::as_bytes(std::span(big))).ok());
  const std::string path = keel::testing::make_temp_dir("gguf-skip") + "/big.gguf";
  ASSERT_TRUE(w.write(path).ok());
  ReadOptions opts;
  opts.skip = [&](const std::vector<TensorInfo>&) {
    return std::vector<ByteRange>{{2 * kMiB, 8 * kMiB}};
  };
  auto f = GgufFile::open(path, opts);
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  const std::byte* base = section(*f).data();
  ASSERT_EQ(reinterpret_cast<uintptr_t>(base) % (2 * kMiB), 0u);
  const long page = ::sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> resident(4 * kMiB / static_cast<uint64_t>(page));
  ASSERT_EQ(::mincore(const_cast<std::byte*>(base) + 4 * kMiB, 4 * kMiB, resident.data()), 0);
  size_t n = 0;
  for (unsigned char r : resident) n += r & 1;
  EXPECT_EQ(n, 0u) << "skipped pages became resident";
  ASSERT_EQ(::mincore(const_cast<std::byte*>(base), static_cast<size_t>(page), resident.data()), 0);
  EXPECT_EQ(resident[0] & 1, 1) << "a read page is resident";
}

// A kept run that ends inside a 2 MiB huge page (an expert shard's boundary, qwen3moe-small's
// experts are 0.9 MB) must not bring the rest of that huge page in: the reader backs such pages
// with 4 KiB pages (AlignedBuffer::split_huge_page_at), so the skipped half stays out.
TEST(GgufSkipTest, AHugePageHalfSkippedKeepsItsSkippedHalfOut) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  GgufWriter w;
  w.set("general.architecture", "llama");
  std::vector<float> big(2 * kMiB, 1.5f);  // 8 MiB
  ASSERT_TRUE(
      w.add_tensor("big", DType::kF32, {int64_t(big.size())}, std::as_bytes(std::span(big))).ok());
  const std::string path = keel::testing::make_temp_dir("gguf-skip-half") + "/big.gguf";
  ASSERT_TRUE(w.write(path).ok());
  ReadOptions opts;
  // Keep [0, 3 MiB) of the data section: the huge page [2, 4) MiB is half read, half skipped.
  opts.skip = [&](const std::vector<TensorInfo>& t) {
    return std::vector<ByteRange>{{3 * kMiB, t[0].num_bytes - 3 * kMiB}};
  };
  auto f = GgufFile::open(path, opts);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const std::byte* base = section(*f).data();
  const long page = ::sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> resident(kMiB / static_cast<uint64_t>(page));
  ASSERT_EQ(::mincore(const_cast<std::byte*>(base) + 3 * kMiB + static_cast<uint64_t>(page),
                      kMiB - static_cast<uint64_t>(page), resident.data()),
            0);
  size_t n = 0;
  for (size_t i = 0; i + 1 < resident.size(); ++i) n += resident[i] & 1;
  EXPECT_EQ(n, 0u) << "the skipped half of a half-read huge page became resident";
  ASSERT_EQ(::mincore(const_cast<std::byte*>(base) + 3 * kMiB - static_cast<uint64_t>(page),
                      static_cast<size_t>(page), resident.data()),
            0);
  EXPECT_EQ(resident[0] & 1, 1) << "the read half is resident";
}

}  // namespace
}  // namespace keel::gguf
