// Hand-crafted broken GGUF files, built byte by byte: each must fail with the precise status
// code and a message that starts with the path and names the problem, in every DataMode.
// The header and metadata cases live here; tensor-info and layout cases in
// reader_tensor_corrupt_test.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "gguf_test_util.h"
#include "support/test_support.h"

namespace keel::gguf {
namespace {

using test_util::ByteBuilder;
using test_util::fails_with;

constexpr uint32_t kU8 = static_cast<uint32_t>(ValueType::kUint8);
constexpr uint32_t kU32 = static_cast<uint32_t>(ValueType::kUint32);
constexpr uint32_t kStr = static_cast<uint32_t>(ValueType::kString);
constexpr uint32_t kArr = static_cast<uint32_t>(ValueType::kArray);
constexpr uint32_t kBoolType = static_cast<uint32_t>(ValueType::kBool);

class GgufCorruptTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = keel::testing::make_temp_dir("gguf-corrupt"); }

  // Writes `b` to a fresh file and expects open() to fail with `code` and `needle` in every mode.
  void expect_fails(const ByteBuilder& b, StatusCode code, std::string_view needle,
                    ReadOptions options = {}) {
    const std::string path = dir_ + "/f" + std::to_string(count_++) + ".gguf";
    test_util::write_bytes(path, b.bytes());
    for (DataMode mode : {DataMode::kRead, DataMode::kMmap, DataMode::kNone}) {
      options.mode = mode;
      EXPECT_TRUE(fails_with(GgufFile::open(path, options), code, path, needle))
          << "mode " << static_cast<int>(mode);
    }
  }

  std::string dir_;
  int count_ = 0;
};

TEST_F(GgufCorruptTest, EmptyFile) {
  expect_fails(ByteBuilder(), StatusCode::kCorrupt,
               "truncated file: magic at offset 0 needs 4 bytes, only 0 remain");
}

TEST_F(GgufCorruptTest, BadMagic) {
  expect_fails(ByteBuilder().u32(0x47475546).u32(3).u64(0).u64(0), StatusCode::kCorrupt,
               "bad magic: not a GGUF file (first bytes 46 55 47 47)");
  expect_fails(ByteBuilder().u32(0), StatusCode::kCorrupt, "bad magic");
}

TEST_F(GgufCorruptTest, UnknownVersions) {
  expect_fails(ByteBuilder().header(1, 0, 0), StatusCode::kUnsupported,
               "GGUF version 1 is not supported");
  expect_fails(ByteBuilder().header(0, 0, 0), StatusCode::kUnsupported, "unknown GGUF version 0");
  expect_fails(ByteBuilder().header(4, 0, 0), StatusCode::kUnsupported, "unknown GGUF version 4");
  expect_fails(ByteBuilder().header(0x03000000, 0, 0), StatusCode::kUnsupported,
               "unknown GGUF version 50331648 (big-endian file?)");
}

TEST_F(GgufCorruptTest, TruncatedHeaderFields) {
  expect_fails(ByteBuilder().u32(kMagic).u8(3), StatusCode::kCorrupt,
               "truncated file: version at offset 4 needs 4 bytes, only 1 remain");
  expect_fails(ByteBuilder().u32(kMagic).u32(3).u32(0), StatusCode::kCorrupt,
               "truncated file: tensor count at offset 8");
  expect_fails(ByteBuilder().u32(kMagic).u32(3).u64(0).u32(0), StatusCode::kCorrupt,
               "truncated file: metadata count at offset 16");
}

TEST_F(GgufCorruptTest, AbsurdCounts) {
  expect_fails(ByteBuilder().header(3, uint64_t{1} << 60, 0), StatusCode::kCorrupt,
               "tensor count 1152921504606846976 is larger than the file can hold");
  expect_fails(ByteBuilder().header(3, 0, uint64_t{1} << 60), StatusCode::kCorrupt,
               "metadata count 1152921504606846976 is larger than the file can hold");
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  expect_fails(ByteBuilder().header(3, max, max), StatusCode::kCorrupt, "metadata count");
  // Each count alone would fit, both together do not: 2 pairs (≥ 26 bytes) + 1 tensor (≥ 32).
  expect_fails(ByteBuilder().header(3, 1, 2).zeros(40), StatusCode::kCorrupt,
               "tensor count 1 is larger than the file can hold (40 bytes follow the header; "
               "truncated file?)");
}

TEST_F(GgufCorruptTest, AbsurdStringLengths) {
  expect_fails(ByteBuilder().header(3, 0, 1).u64(uint64_t{1} << 40).zeros(16), StatusCode::kCorrupt,
               "metadata pair 0: metadata key of length 1099511627776 at offset 24 runs past the "
               "end of the file");
  expect_fails(ByteBuilder().header(3, 0, 1).str("k").u32(kStr).u64(uint64_t{1} << 40).u32(7),
               StatusCode::kCorrupt,
               "metadata key 'k': string value of length 1099511627776 at offset 37 runs past");
  // A string in an array.
  expect_fails(ByteBuilder().header(3, 0, 1).str("k").u32(kArr).u32(kStr).u64(1).u64(1000),
               StatusCode::kCorrupt, "metadata key 'k': string value of length 1000");
}

TEST_F(GgufCorruptTest, AbsurdArrayLengths) {
  const uint64_t huge = uint64_t{1} << 62;
  expect_fails(ByteBuilder().header(3, 0, 1).str("k").u32(kArr).u32(kU8).u64(huge).zeros(8),
               StatusCode::kCorrupt,
               "metadata key 'k': array of 4611686018427387904 uint8 values at offset 37 is "
               "larger than the file can hold (8 bytes remain; truncated file?)");
  expect_fails(ByteBuilder().header(3, 0, 1).str("k").u32(kArr).u32(kStr).u64(huge),
               StatusCode::kCorrupt, "array of 4611686018427387904 string values");
  expect_fails(ByteBuilder().header(3, 0, 1).str("k").u32(kArr).u32(kArr).u64(huge),
               StatusCode::kCorrupt, "array of 4611686018427387904 array values");
  // Just one element too many: 10 uint32 claimed, 9 present.
  expect_fails(ByteBuilder().header(3, 0, 1).str("k").u32(kArr).u32(kU32).u64(10).zeros(36),
               StatusCode::kCorrupt, "array of 10 uint32 values");
  // An inner array too long for what is left.
  expect_fails(
      ByteBuilder().header(3, 0, 1).str("k").u32(kArr).u32(kArr).u64(1).u32(kU32).u64(huge).zeros(
          4),
      StatusCode::kCorrupt, "array of 4611686018427387904 uint32 values");
}

TEST_F(GgufCorruptTest, TruncatedValues) {
  expect_fails(ByteBuilder().header(3, 0, 1).str("k").u32(kU32).u8(1), StatusCode::kCorrupt,
               "metadata key 'k': truncated file: uint32 value at offset 37 needs 4 bytes");
  expect_fails(ByteBuilder().header(3, 0, 1).str("k").u32(kStr).u64(5).u32(0), StatusCode::kCorrupt,
               "metadata key 'k': string value of length 5");
  expect_fails(ByteBuilder().header(3, 0, 2).kv_u32("a", 1).str("b"), StatusCode::kCorrupt,
               "metadata key 'b': truncated file: metadata value type");
  expect_fails(ByteBuilder().header(3, 0, 1).str("k").u32(kArr).u32(kU8).u64(3).u8(1).u8(2),
               StatusCode::kCorrupt, "array of 3 uint8 values");
}

TEST_F(GgufCorruptTest, UnknownValueTypes) {
  expect_fails(ByteBuilder().header(3, 0, 1).str("k").u32(13).u64(0), StatusCode::kCorrupt,
               "metadata key 'k': unknown metadata value type 13 at offset 33");
  expect_fails(ByteBuilder().header(3, 0, 1).str("k").u32(0xffffffff).u64(0), StatusCode::kCorrupt,
               "unknown metadata value type 4294967295");
  expect_fails(ByteBuilder().header(3, 0, 1).str("k").u32(kArr).u32(13).u64(0),
               StatusCode::kCorrupt, "metadata key 'k': unknown array element type 13");
  // Inside a nested array.
  expect_fails(ByteBuilder().header(3, 0, 1).str("k").u32(kArr).u32(kArr).u64(1).u32(99).u64(0),
               StatusCode::kCorrupt, "unknown array element type 99");
}

TEST_F(GgufCorruptTest, BoolOutOfRange) {
  expect_fails(ByteBuilder().header(3, 0, 1).str("k").u32(kBoolType).u8(2), StatusCode::kCorrupt,
               "metadata key 'k': bool value 2 at offset 37 is not 0 or 1");
  expect_fails(ByteBuilder().header(3, 0, 1).str("k").u32(kArr).u32(kBoolType).u64(2).u8(1).u8(255),
               StatusCode::kCorrupt, "bool value 255");
}

TEST_F(GgufCorruptTest, ArraysNestedTooDeep) {
  // kMaxArrayDepth levels are fine; one more is rejected, as is a hostile 10000-deep nest
  // (without deep recursion: parsing stops at the limit).
  auto nest = [](int levels) {
    ByteBuilder b;
    b.header(3, 0, 1).str("k").u32(kArr);
    for (int i = 1; i < levels; ++i) b.u32(kArr).u64(1);
    return b.u32(kU8).u64(0);
  };
  const std::string ok_path = dir_ + "/deep-ok.gguf";
  test_util::write_bytes(ok_path, nest(kMaxArrayDepth).bytes());
  auto f = GgufFile::open(ok_path);
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  const Value* v = f->find("k");
  for (int i = 1; i < kMaxArrayDepth; ++i) v = &v->as_array()->items.at(0);
  EXPECT_EQ(v->as_array()->type, ValueType::kUint8);
  expect_fails(nest(kMaxArrayDepth + 1), StatusCode::kCorrupt,
               "metadata key 'k': arrays nested more than 8 levels deep");
  expect_fails(nest(10000), StatusCode::kCorrupt, "arrays nested more than 8 levels deep");
}

TEST_F(GgufCorruptTest, DuplicateKeys) {
  expect_fails(ByteBuilder().header(3, 0, 3).kv_u32("a", 1).kv_u32("b", 2).kv_u32("a", 3),
               StatusCode::kCorrupt,
               "metadata key 'a': duplicate metadata key, first defined by metadata pair 0");
}

TEST_F(GgufCorruptTest, NamesInMessagesAreEscapedAndShortened) {
  // Control bytes are escaped; a long name is cut (the message stays readable and one line).
  expect_fails(ByteBuilder().header(3, 0, 2).kv_u32("a\nb\x01", 1).kv_u32("a\nb\x01", 2),
               StatusCode::kCorrupt, "metadata key 'a\\x0ab\\x01': duplicate metadata key");
  const std::string long_key(300, 'k');
  expect_fails(ByteBuilder().header(3, 0, 2).kv_u32(long_key, 1).kv_u32(long_key, 2),
               StatusCode::kCorrupt,
               "metadata key '" + std::string(96, 'k') + "'... (300 bytes): duplicate");
}

TEST_F(GgufCorruptTest, BadAlignmentValues) {
  for (uint32_t a : {0u, 3u, 48u, 0x80000000u}) {
    expect_fails(ByteBuilder().header(3, 0, 1).kv_u32("general.alignment", a), StatusCode::kCorrupt,
                 "metadata key 'general.alignment': alignment must be a power of two from 1 to "
                 "1073741824, got " +
                     std::to_string(a));
  }
  GgufWriter w;  // the writer writes what it is given; these values are not used for its layout
  w.set("general.alignment", int32_t{-32});
  auto bytes = w.to_bytes();
  ASSERT_TRUE(bytes.ok());
  ByteBuilder raw;
  for (std::byte b : *bytes) raw.u8(static_cast<uint8_t>(b));
  expect_fails(raw, StatusCode::kCorrupt, "got -32");
  for (const Value& v : {Value(std::string("32")), Value(32.0f), Value(true),
                         Value(std::numeric_limits<uint64_t>::max()), Value(uint64_t{1} << 31)}) {
    GgufWriter bad;
    bad.set("general.alignment", v);
    auto b = bad.to_bytes();
    ASSERT_TRUE(b.ok());
    ByteBuilder copy;
    for (std::byte x : *b) copy.u8(static_cast<uint8_t>(x));
    expect_fails(copy, StatusCode::kCorrupt,
                 "'general.alignment': alignment must be a power of two");
  }
}

TEST_F(GgufCorruptTest, MetadataValueLimit) {
  GgufWriter w;
  w.set("a", make_array<uint8_t>(ValueType::kUint8, std::vector<uint8_t>(20, 1)));
  auto bytes = w.to_bytes();
  ASSERT_TRUE(bytes.ok());
  ByteBuilder raw;
  for (std::byte b : *bytes) raw.u8(static_cast<uint8_t>(b));
  ReadOptions opts;
  opts.max_metadata_values = 10;
  expect_fails(raw, StatusCode::kOutOfRange,
               "metadata key 'a': metadata holds more than 10 values "
               "(ReadOptions::max_metadata_values)",
               opts);
  opts.max_metadata_values = 21;  // the pair itself and its 20 elements
  const std::string path = dir_ + "/limit.gguf";
  test_util::write_bytes(path, raw.bytes());
  EXPECT_TRUE(GgufFile::open(path, opts).ok());
}

TEST_F(GgufCorruptTest, HeaderOnlyFilesAreValid) {
  // No tensors and no metadata: valid, even though the (empty) data section would start past
  // the end of the file.
  const std::string path = dir_ + "/empty-model.gguf";
  test_util::write_bytes(path, ByteBuilder().header(2, 0, 0).bytes());
  for (DataMode mode : {DataMode::kRead, DataMode::kMmap, DataMode::kNone}) {
    auto f = GgufFile::open(path, {.mode = mode});
    ASSERT_TRUE(f.ok()) << f.error().to_string();
    EXPECT_EQ(f->version(), 2u);
    EXPECT_TRUE(f->metadata().empty());
    EXPECT_TRUE(f->tensors().empty());
    EXPECT_FALSE(f->has_data());
  }
}

TEST_F(GgufCorruptTest, MissingFileIsNotFound) {
  const std::string path = dir_ + "/does-not-exist.gguf";
  EXPECT_TRUE(fails_with(GgufFile::open(path), StatusCode::kNotFound, path, "cannot open"));
}

}  // namespace
}  // namespace keel::gguf
