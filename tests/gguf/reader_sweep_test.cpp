// Sweeps over damaged copies of a small valid file: every prefix (truncation at each length)
// and a few thousand seeded random mutations. Each open must either succeed with a file whose
// invariants hold or fail with a Status naming the file — never crash or read out of bounds
// (the suite runs under ASan/UBSan).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf_test_util.h"
#include "support/test_support.h"
#include "test_file_systems.h"

namespace keel::gguf {
namespace {

constexpr DataMode kSweepModes[] = {DataMode::kRead, DataMode::kMmap, DataMode::kNone};

std::vector<std::byte> small_model_bytes(uint32_t version = 3) {
  auto bytes = test_util::small_model(version).to_bytes();
  EXPECT_TRUE(bytes.ok());
  return bytes.ok() ? *bytes : std::vector<std::byte>{};
}

// Checks what a successful open promises: shapes, sizes and views inside the file. Touches the
// first and last byte of every view so ASan sees any view that escapes its buffer.
::testing::AssertionResult invariants_hold(const GgufFile& f, DataMode mode) {
  if (f.data_offset() % f.alignment() != 0) return ::testing::AssertionFailure() << "data offset";
  const uint64_t data_size = f.file_size() >= f.data_offset() ? f.file_size() - f.data_offset() : 0;
  unsigned sum = 0;
  for (const TensorInfo& t : f.tensors()) {
    if (t.shape.empty() || t.shape.size() > static_cast<size_t>(kMaxDims)) {
      return ::testing::AssertionFailure() << t.name << ": rank " << t.shape.size();
    }
    int64_t n = 1;
    for (int64_t d : t.shape) {
      if (d < 0) return ::testing::AssertionFailure() << t.name << ": negative dimension";
      n *= d;
    }
    const DTypeInfo& info = dtype_info(t.dtype);
    if (n != t.num_elements ||
        t.num_bytes != static_cast<uint64_t>(n / info.block_size * info.block_bytes)) {
      return ::testing::AssertionFailure() << t.name << ": element or byte count";
    }
    if (t.offset % f.alignment() != 0 || t.offset > data_size ||
        t.num_bytes > data_size - t.offset) {
      return ::testing::AssertionFailure() << t.name << ": outside the data section";
    }
    if (f.find_tensor(t.name) != &t) return ::testing::AssertionFailure() << t.name << ": index";
    auto view = f.tensor_data(t);
    if (mode == DataMode::kNone ? !view.empty() : view.size() != t.num_bytes) {
      return ::testing::AssertionFailure() << t.name << ": view of " << view.size() << " bytes";
    }
    if (!view.empty())
      sum += static_cast<unsigned>(view.front()) + static_cast<unsigned>(view.back());
  }
  for (const KeyValue& kv : f.metadata()) {
    if (f.find(kv.key) != &kv.value) return ::testing::AssertionFailure() << kv.key << ": index";
  }
  return ::testing::AssertionSuccess() << sum;
}

TEST(GgufSweepTest, EveryPrefixFailsCleanlyUntilTheLastTensorIsComplete) {
  for (uint32_t version : {2u, 3u}) {
    const std::vector<std::byte> full = small_model_bytes(version);
    const std::string dir = keel::testing::make_temp_dir("gguf-truncate");
    const std::string full_path = dir + "/full.gguf";
    test_util::write_bytes(full_path, full);
    auto whole = GgufFile::open(full_path);
    ASSERT_TRUE(whole.ok()) << whole.error().to_string();
    ASSERT_EQ(whole->tensors().size(), 3u);
    uint64_t data_end = 0;
    for (const TensorInfo& t : whole->tensors())
      data_end = std::max(data_end, t.offset + t.num_bytes);
    const uint64_t required = whole->data_offset() + data_end;
    ASSERT_LT(required, full.size()) << "the last tensor should end in padding";

    const std::string path = dir + "/prefix.gguf";
    int failures = 0, successes = 0;
    for (size_t len = 0; len < full.size(); ++len) {
      test_util::write_bytes(path, std::vector<std::byte>(full.begin(), full.begin() + len));
      for (DataMode mode : kSweepModes) {
        auto f = GgufFile::open(path, {.mode = mode});
        if (len < required) {
          // Metadata, tensor infos or tensor bytes are cut: the same error in every mode.
          ASSERT_FALSE(f.ok()) << "prefix " << len << " mode " << static_cast<int>(mode);
          ASSERT_TRUE(test_util::fails_with(f, StatusCode::kCorrupt, path, "truncated"))
              << "prefix " << len;
          ++failures;
        } else {
          // Only trailing padding is missing: valid, with the same tensors and bytes.
          ASSERT_TRUE(f.ok()) << "prefix " << len << ": " << f.error().to_string();
          ASSERT_TRUE(invariants_hold(*f, mode));
          ASSERT_EQ(f->tensors().size(), 3u);
          if (mode != DataMode::kNone) {
            for (const TensorInfo& t : whole->tensors()) {
              auto a = whole->tensor_data(t);
              auto b = f->tensor_data(*f->find_tensor(t.name));
              ASSERT_EQ(a.size(), b.size());
              ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << t.name;
            }
          }
          ++successes;
        }
      }
    }
    EXPECT_EQ(failures, static_cast<int>(required) * 3);
    EXPECT_EQ(successes, static_cast<int>(full.size() - required) * 3);
  }
}

// One seeded random damage: a byte overwritten, a bit flipped, or 4/8 bytes replaced by a value
// that stresses bounds checks (0, 1, powers of two near the limits, all ones).
void mutate(std::vector<std::byte>& bytes, uint64_t header_end, std::mt19937_64& rng) {
  static constexpr uint64_t kInteresting[] = {0,
                                              1,
                                              2,
                                              13,
                                              255,
                                              0x7fffffffu,
                                              0xffffffffu,
                                              uint64_t{1} << 32,
                                              uint64_t{1} << 40,
                                              uint64_t{1} << 60,
                                              uint64_t{1} << 62,
                                              uint64_t{1} << 63,
                                              ~uint64_t{0},
                                              ~uint64_t{0} - 31};
  // Three quarters of the damage goes to the header, where the parsing happens.
  const uint64_t span = rng() % 4 != 0 ? header_end : bytes.size();
  const size_t pos = static_cast<size_t>(rng() % span);
  switch (rng() % 4) {
    case 0:
      bytes[pos] = static_cast<std::byte>(rng());
      break;
    case 1:
      bytes[pos] ^= static_cast<std::byte>(1u << (rng() % 8));
      break;
    default: {
      const uint64_t v = kInteresting[rng() % std::size(kInteresting)];
      const size_t width = rng() % 2 == 0 ? 4 : 8;
      const size_t n = std::min(width, bytes.size() - pos);
      std::memcpy(bytes.data() + pos, &v, n);
      break;
    }
  }
}

TEST(GgufSweepTest, RandomMutationsParseOrFailCleanly) {
  const std::vector<std::byte> original = small_model_bytes();
  test_util::MemoryFileSystem fs;
  fs.put("/mem/original.gguf", original);
  auto clean = GgufFile::open("/mem/original.gguf", {.fs = &fs});
  ASSERT_TRUE(clean.ok()) << clean.error().to_string();
  const uint64_t header_end = clean->data_offset();

  std::mt19937_64 rng(20240611);
  constexpr int kIterations = 3000;
  int opened = 0, failed = 0;
  const std::string path = "/mem/mutated.gguf";
  for (int i = 0; i < kIterations; ++i) {
    std::vector<std::byte> bytes = original;
    const int num_mutations = 1 + static_cast<int>(rng() % 3);
    for (int m = 0; m < num_mutations; ++m) mutate(bytes, header_end, rng);
    fs.put(path, bytes);
    for (DataMode mode : kSweepModes) {
      ReadOptions opts;
      opts.mode = mode;
      opts.fs = &fs;
      auto f = GgufFile::open(path, opts);
      if (f.ok()) {
        ASSERT_TRUE(invariants_hold(*f, mode)) << "iteration " << i;
        ++opened;
      } else {
        const Status& s = f.error();
        ASSERT_TRUE(s.code() == StatusCode::kCorrupt || s.code() == StatusCode::kUnsupported ||
                    s.code() == StatusCode::kOutOfRange)
            << "iteration " << i << ": " << s.to_string();
        ASSERT_EQ(s.message().rfind(path + ": ", 0), 0u) << s.message();
        ++failed;
      }
    }
  }
  RecordProperty("opened", opened);
  RecordProperty("failed", failed);
  // Both outcomes must be common, or the sweep is not exercising the parser.
  EXPECT_GT(opened, kIterations / 10);
  EXPECT_GT(failed, kIterations / 2);
}

}  // namespace
}  // namespace keel::gguf
