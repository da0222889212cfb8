// Fault injection through FaultFileSystem: failed opens, reads that fail after N bytes (in the
// header, across buffer refills, in the tensor data), failed and short mappings, and write and
// close failures in the writer. File-system errors must reach the caller as kIoError naming the
// file, never turn into a crash, a kCorrupt or a half-written model.
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "gguf_test_util.h"
#include "support/test_support.h"
#include "test_file_systems.h"

namespace keel::gguf {
namespace {

using test_util::fails_with;
using test_util::FaultFileSystem;
using test_util::FaultPlan;

// A file whose header spans several 1 MiB reader buffers and whose data takes a while to read.
std::string write_big_model(const std::string& dir) {
  GgufWriter w;
  w.set("general.architecture", "llama");
  w.set("big", std::string(size_t{5} << 18, 'x'));  // 1.25 MiB
  std::vector<float> a(20000, 1.0f), b(333, 2.0f);
  EXPECT_TRUE(w.add_tensor("a", DType::kF32, {20000}, std::as_bytes(std::span(a))).ok());
  EXPECT_TRUE(w.add_tensor("b", DType::kF32, {333}, std::as_bytes(std::span(b))).ok());
  const std::string path = dir + "/big.gguf";
  EXPECT_TRUE(w.write(path).ok());
  return path;
}

Result<GgufFile> open_with(FaultFileSystem* fs, const std::string& path, DataMode mode) {
  ReadOptions opts;
  opts.mode = mode;
  opts.fs = fs;
  return GgufFile::open(path, opts);
}

TEST(GgufFaultTest, OpenFailurePropagates) {
  const std::string path = test_util::write_small_model(keel::testing::make_temp_dir("gguf-fault"));
  PosixFileSystem posix;
  FaultFileSystem fs(&posix, {.fail_open = true});
  EXPECT_TRUE(fails_with(open_with(&fs, path, DataMode::kRead), StatusCode::kIoError, path,
                         "injected open failure"));
}

TEST(GgufFaultTest, ReadFailuresAnywherePropagateAsIoError) {
  const std::string path = write_big_model(keel::testing::make_temp_dir("gguf-fault"));
  PosixFileSystem posix;
  for (DataMode mode : {DataMode::kRead, DataMode::kMmap, DataMode::kNone}) {
    FaultFileSystem clean(&posix, {});
    ASSERT_TRUE(open_with(&clean, path, mode).ok());
    const uint64_t total = clean.bytes_read();  // what a successful open reads
    ASSERT_GT(total, uint64_t{5} << 18);
    // Limits at the start, around each 1 MiB buffer refill, and spread over the rest.
    std::set<uint64_t> limits = {0, 1, 3, 4, 23, 24, total - 1};
    for (uint64_t mib = uint64_t{1} << 20; mib < total; mib += uint64_t{1} << 20) {
      limits.insert({mib - 1, mib, mib + 1});
    }
    for (uint64_t n = 0; n < total; n += total / 20) limits.insert(n);
    for (uint64_t limit : limits) {
      FaultFileSystem fs(&posix, {.fail_reads_after = limit});
      EXPECT_TRUE(fails_with(open_with(&fs, path, mode), StatusCode::kIoError, path,
                             "injected I/O error after " + std::to_string(limit)))
          << "mode " << static_cast<int>(mode) << " limit " << limit;
    }
    FaultFileSystem enough(&posix, {.fail_reads_after = total});
    EXPECT_TRUE(open_with(&enough, path, mode).ok()) << "mode " << static_cast<int>(mode);
  }
}

TEST(GgufFaultTest, MmapFailurePropagates) {
  const std::string path = test_util::write_small_model(keel::testing::make_temp_dir("gguf-fault"));
  PosixFileSystem posix;
  FaultFileSystem fs(&posix, {.fail_map = true});
  EXPECT_TRUE(fails_with(open_with(&fs, path, DataMode::kMmap), StatusCode::kIoError, path,
                         "injected mmap failure"));
  // The other modes never map.
  EXPECT_TRUE(open_with(&fs, path, DataMode::kRead).ok());
  EXPECT_TRUE(open_with(&fs, path, DataMode::kNone).ok());
}

TEST(GgufFaultTest, ShortMappingIsRejected) {
  const std::string path = test_util::write_small_model(keel::testing::make_temp_dir("gguf-fault"));
  PosixFileSystem posix;
  FaultFileSystem fs(&posix, {.short_map = true});
  const uint64_t size = std::filesystem::file_size(path);
  EXPECT_TRUE(fails_with(
      open_with(&fs, path, DataMode::kMmap), StatusCode::kIoError, path,
      "mapping holds " + std::to_string(size / 2) + " bytes, the file " + std::to_string(size)));
}

TEST(GgufFaultTest, ProgressReportsTheWholeDataSection) {
  const std::string path = write_big_model(keel::testing::make_temp_dir("gguf-fault"));
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  ReadOptions opts;
  opts.progress = [&calls](uint64_t done, uint64_t total) { calls.emplace_back(done, total); };
  auto f = GgufFile::open(path, opts);
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  ASSERT_FALSE(calls.empty());
  const uint64_t data_size = f->file_size() - f->data_offset();
  EXPECT_EQ(calls.back(), std::make_pair(data_size, data_size));
  for (size_t i = 1; i < calls.size(); ++i) EXPECT_GT(calls[i].first, calls[i - 1].first);
}

TEST(GgufFaultTest, WriterFailuresLeaveNoFile) {
  const std::string dir = keel::testing::make_temp_dir("gguf-fault-write");
  const std::string path = dir + "/out.gguf";
  auto bytes = test_util::small_model().to_bytes();
  ASSERT_TRUE(bytes.ok());
  PosixFileSystem posix;
  for (uint64_t limit : {uint64_t{0}, uint64_t{10}, uint64_t{200}, bytes->size() - 1}) {
    FaultFileSystem fs(&posix, {.fail_writes_after = limit});
    const Status s = test_util::small_model().write(path, &fs);
    EXPECT_EQ(s.code(), StatusCode::kIoError) << s.to_string();
    EXPECT_EQ(s.message().rfind(
                  path + ".tmp." + std::to_string(::getpid()) + ": injected write error", 0),
              0u)
        << s.message();
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_TRUE(std::filesystem::is_empty(dir)) << "a temporary file was left behind";
  }
  FaultFileSystem close_fails(&posix, {.fail_close = true});
  const Status s = test_util::small_model().write(path, &close_fails);
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.to_string();
  EXPECT_NE(s.message().find("injected close failure"), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "a temporary file was left behind";
  // With room for every byte the write succeeds and matches to_bytes().
  FaultFileSystem enough(&posix, {.fail_writes_after = bytes->size()});
  ASSERT_TRUE(test_util::small_model().write(path, &enough).ok());
  EXPECT_EQ(test_util::read_bytes(path), *bytes);
}

}  // namespace
}  // namespace keel::gguf
