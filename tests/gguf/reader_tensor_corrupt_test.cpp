// Hand-crafted broken tensor infos and data layouts: too many dimensions, negative dimensions,
// element and byte counts that overflow, unknown types, misaligned or out-of-range offsets,
// duplicate names and a missing data section. Also pins down what is allowed: overlapping
// tensors and empty tensors.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "gguf/reader.h"
#include "gguf_test_util.h"
#include "support/test_support.h"

namespace keel::gguf {
namespace {

using test_util::ByteBuilder;
using test_util::fails_with;

constexpr uint32_t kF32 = 0;
constexpr uint32_t kQ4_0 = 2;
constexpr uint32_t kQ8_0 = 8;
constexpr uint32_t kI32 = 26;
constexpr uint32_t kF64 = 28;

class GgufTensorCorruptTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = keel::testing::make_temp_dir("gguf-tensor-corrupt"); }

  std::string write(const ByteBuilder& b) {
    const std::string path = dir_ + "/f" + std::to_string(count_++) + ".gguf";
    test_util::write_bytes(path, b.bytes());
    return path;
  }

  // One tensor info (and `data_bytes` of zeroed, aligned data) must fail in every mode.
  void expect_tensor_fails(const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset,
                           StatusCode code, std::string_view needle, size_t data_bytes = 64) {
    ByteBuilder b;
    b.header(3, 1, 0).tensor_info("t", dims, type, offset).pad_to(32).zeros(data_bytes);
    expect_fails(b, code, needle);
  }

  void expect_fails(const ByteBuilder& b, StatusCode code, std::string_view needle) {
    const std::string path = write(b);
    for (DataMode mode : {DataMode::kRead, DataMode::kMmap, DataMode::kNone}) {
      EXPECT_TRUE(fails_with(GgufFile::open(path, {.mode = mode}), code, path, needle))
          << "mode " << static_cast<int>(mode);
    }
  }

  std::string dir_;
  int count_ = 0;
};

TEST_F(GgufTensorCorruptTest, DimensionCounts) {
  expect_tensor_fails({1, 1, 1, 1, 1}, kF32, 0, StatusCode::kCorrupt,
                      "tensor 't': has 5 dimensions (1 to 4 allowed)");
  expect_tensor_fails({}, kF32, 0, StatusCode::kCorrupt, "tensor 't': has 0 dimensions");
  ByteBuilder b;  // a dimension count of 2^32-1 (the dimensions themselves are never read)
  b.header(3, 1, 0).str("t").u32(0xffffffff).zeros(64);
  expect_fails(b, StatusCode::kCorrupt, "has 4294967295 dimensions");
}

TEST_F(GgufTensorCorruptTest, NegativeDimension) {
  expect_tensor_fails({4, static_cast<uint64_t>(int64_t{-2})}, kF32, 0, StatusCode::kCorrupt,
                      "tensor 't': dimension 1 is negative (-2)");
}

TEST_F(GgufTensorCorruptTest, ElementCountOverflow) {
  expect_tensor_fails({uint64_t{1} << 32, uint64_t{1} << 32}, kF32, 0, StatusCode::kCorrupt,
                      "tensor 't': element count overflows: dimension 1");
  expect_tensor_fails({4, 1 << 20, 1 << 20, 1 << 21}, kF32, 0, StatusCode::kCorrupt,
                      "element count overflows: dimension 3");
}

TEST_F(GgufTensorCorruptTest, ByteCountOverflow) {
  // 2^62 F32 elements fit in int64 but need 2^64 bytes: once wrapped to 0 bytes and accepted.
  expect_tensor_fails({uint64_t{1} << 62}, kF32, 0, StatusCode::kCorrupt,
                      "tensor 't': byte size of 4611686018427387904 F32 elements overflows");
  expect_tensor_fails({uint64_t{1} << 61}, kF64, 0, StatusCode::kCorrupt, "F64 elements overflows");
  expect_tensor_fails({uint64_t{1} << 62}, kI32, 0, StatusCode::kCorrupt, "I32 elements overflows");
  // Block types compress: 2^62 Q8_0 elements take 2^57 * 34 bytes, no overflow, far too big.
  expect_tensor_fails({uint64_t{1} << 62}, kQ8_0, 0, StatusCode::kCorrupt,
                      "(4899916394579099648 bytes at data offset 0) lies outside");
  // Large but representable: rejected because it lies outside the file.
  expect_tensor_fails({uint64_t{1} << 40}, kF32, 0, StatusCode::kCorrupt,
                      "tensor 't' (4398046511104 bytes at data offset 0) lies outside the file");
}

TEST_F(GgufTensorCorruptTest, UnknownTensorTypes) {
  expect_tensor_fails({32}, 4, 0, StatusCode::kUnsupported, "tensor 't': unknown tensor type id 4");
  expect_tensor_fails({32}, 1000, 0, StatusCode::kUnsupported, "unknown tensor type id 1000");
  expect_tensor_fails({32}, 0xffffffff, 0, StatusCode::kUnsupported,
                      "unknown tensor type id 4294967295");
}

TEST_F(GgufTensorCorruptTest, RowNotAMultipleOfTheBlockSize) {
  expect_tensor_fails({33, 2}, kQ4_0, 0, StatusCode::kCorrupt,
                      "tensor 't': row of 33 elements is not a multiple of the Q4_0 block size 32");
}

TEST_F(GgufTensorCorruptTest, Offsets) {
  expect_tensor_fails({4}, kF32, 4, StatusCode::kCorrupt,
                      "tensor 't': data offset 4 is not aligned to 32");
  expect_tensor_fails({4}, kF32, 64, StatusCode::kCorrupt,
                      "tensor 't' (16 bytes at data offset 64) lies outside the file's 64-byte "
                      "data section");
  expect_tensor_fails({16}, kF32, 32, StatusCode::kCorrupt, "lies outside", 64);  // 32 + 64 > 64
  // offset + size wraps around 2^64.
  const uint64_t near_max = std::numeric_limits<uint64_t>::max() - 31;  // a multiple of 32
  expect_tensor_fails({16}, kF32, near_max, StatusCode::kCorrupt,
                      "(64 bytes at data offset 18446744073709551584) lies outside");
}

TEST_F(GgufTensorCorruptTest, DuplicateTensorNames) {
  ByteBuilder b;
  b.header(3, 3, 0)
      .tensor_info("x", {8}, kF32, 0)
      .tensor_info("y", {8}, kF32, 32)
      .tensor_info("x", {8}, kF32, 64)
      .pad_to(32)
      .zeros(96);
  expect_fails(b, StatusCode::kCorrupt,
               "tensor 'x': duplicate tensor name, first defined by tensor info 0");
}

TEST_F(GgufTensorCorruptTest, TruncatedTensorInfo) {
  ByteBuilder b;
  b.header(3, 2, 0).tensor_info("x", {8, 1, 1, 1}, kF32, 0).str("y").u32(1).u64(8).u32(kF32);
  expect_fails(b, StatusCode::kCorrupt, "tensor 'y': truncated file: tensor offset at offset");
  ByteBuilder c;
  c.header(3, 1, 0).u64(40).zeros(30);
  expect_fails(c, StatusCode::kCorrupt,
               "tensor info 0: tensor name of length 40 at offset 24 runs past the end of the "
               "file (30 bytes remain; truncated file?)");
}

TEST_F(GgufTensorCorruptTest, DataSectionMissing) {
  ByteBuilder b;
  b.header(3, 1, 0).tensor_info("t", {8}, kF32, 0);
  ASSERT_NE(b.size() % 32, 0u);  // the header ends unaligned, so the data would start past the end
  expect_fails(b, StatusCode::kCorrupt,
               "truncated file: the tensor data section is missing (it would start at 64, the "
               "file has 57 bytes)");
  b.pad_to(32);  // data section present but empty
  expect_fails(b, StatusCode::kCorrupt, "tensor 't' (32 bytes at data offset 0) lies outside");
}

TEST_F(GgufTensorCorruptTest, OverlappingAndEmptyTensorsAreAllowed) {
  // Documented choice (as in llama.cpp): tensors may share bytes; each must lie inside the file.
  ByteBuilder b;
  b.header(3, 3, 0)
      .tensor_info("a", {8}, kF32, 0)
      .tensor_info("b", {4, 2}, kF32, 0)
      .tensor_info("empty", {0, 5}, kF32, 32)
      .pad_to(32);
  for (int i = 0; i < 32; ++i) b.u8(static_cast<uint8_t>(i));
  const std::string path = write(b);
  for (DataMode mode : {DataMode::kRead, DataMode::kMmap}) {
    auto f = GgufFile::open(path, {.mode = mode});
    ASSERT_TRUE(f.ok()) << f.error().to_string();
    auto a = f->tensor_data(*f->find_tensor("a"));
    auto bb = f->tensor_data(*f->find_tensor("b"));
    ASSERT_EQ(a.size(), 32u);
    EXPECT_EQ(a.data(), bb.data());
    EXPECT_EQ(static_cast<int>(a[31]), 31);
    const TensorInfo* e = f->find_tensor("empty");
    EXPECT_EQ(e->num_elements, 0);
    EXPECT_EQ(e->num_bytes, 0u);
    EXPECT_TRUE(f->tensor_data(*e).empty());
  }
}

}  // namespace
}  // namespace keel::gguf
