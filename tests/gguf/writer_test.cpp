// GgufWriter: round trips through GgufFile, v2 output, in-place replacement of keys, and the
// checks that keep it from writing unreadable files (mistyped arrays, shapes that overflow,
// tensors whose fill fails or gives the wrong number of bytes, unusable alignments).
#include "gguf/writer.h"

#include <gtest/gtest.h>

#include <cstring>

#include "gguf/reader.h"
#include "gguf_test_util.h"
#include "support/test_support.h"

namespace keel::gguf {
namespace {

TEST(GgufWriterTest, RoundTripsMetadataAndTensors) {
  GgufWriter w;
  w.set("general.architecture", "llama");
  w.set("test.u32", uint32_t{7});
  w.set("test.f32", 1.5f);
  w.set("test.strings", make_array<std::string>(ValueType::kString, {"a", "bc", ""}));
  std::vector<float> data = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(
      w.add_tensor("t", DType::kF32, {3, 2}, std::as_bytes(std::span<const float>(data))).ok());
  EXPECT_FALSE(w.add_tensor("t", DType::kF32, {1}, std::span<const std::byte>()).ok());
  const std::string path = testing::make_temp_dir("gguf-writer") + "/rt.gguf";
  ASSERT_TRUE(w.write(path).ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  EXPECT_EQ(*f->get_string("general.architecture"), "llama");
  EXPECT_EQ(*f->get_int("test.u32"), 7);
  EXPECT_EQ(*f->get_float("test.f32"), 1.5);
  EXPECT_EQ(*(*f->get_array("test.strings"))->items[1].as_string(), "bc");
  const TensorInfo* t = f->find_tensor("t");
  ASSERT_NE(t, nullptr);
  auto bytes = f->tensor_data(*t);
  ASSERT_EQ(bytes.size(), 24u);
  EXPECT_EQ(std::memcmp(bytes.data(), data.data(), 24), 0);
}

TEST(GgufWriterTest, WritesVersion2) {
  GgufWriter w(2);
  w.set("k", uint8_t{1});
  auto bytes = w.to_bytes();
  ASSERT_TRUE(bytes.ok());
  uint32_t version = 0;
  std::memcpy(&version, bytes->data() + 4, 4);
  EXPECT_EQ(version, 2u);
}

TEST(GgufWriterTest, SetReplacesInPlace) {
  GgufWriter w;
  w.set("a", uint8_t{1});
  w.set("b", uint8_t{2});
  w.set("a", "now a string");
  const std::string path = testing::make_temp_dir("gguf-writer") + "/set.gguf";
  ASSERT_TRUE(w.write(path).ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  ASSERT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata()[0].key, "a");
  EXPECT_EQ(*f->get_string("a"), "now a string");
}

TEST(GgufWriterTest, RejectsArraysWithMistypedElements) {
  GgufWriter w;
  Array a;
  a.type = ValueType::kUint8;
  a.items = {uint8_t{1}, std::string("x")};
  w.set("bad", Value(a));
  auto bytes = w.to_bytes();
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bytes.error().message(), "metadata key 'bad'[1] has type string in an array of uint8");
  // Nested: the inner array's declared type is checked too.
  Array inner;
  inner.type = ValueType::kInt32;
  inner.items = {int32_t{1}, int64_t{2}};
  Array outer;
  outer.type = ValueType::kArray;
  outer.items = {Value(Array{ValueType::kInt32, {}}), Value(inner)};
  GgufWriter w2;
  w2.set("nested", Value(outer));
  auto b2 = w2.to_bytes();
  ASSERT_FALSE(b2.ok());
  EXPECT_EQ(b2.error().message(),
            "metadata key 'nested'[1][1] has type int64 in an array of int32");
}

TEST(GgufWriterTest, RejectsBadShapesWithoutOverflow) {
  GgufWriter w;
  auto none = [](std::span<std::byte>) { return Status(); };
  EXPECT_EQ(w.add_tensor("neg", DType::kF32, {4, -1}, none).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w.add_tensor("huge", DType::kF32, {int64_t{1} << 40, int64_t{1} << 40}, none).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(w.add_tensor("bytes", DType::kF64, {int64_t{1} << 62}, none).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(w.add_tensor("rank5", DType::kF32, {1, 1, 1, 1, 1}, none).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(w.add_tensor("rank0", DType::kF32, {}, none).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w.add_tensor("block", DType::kQ4_0, {33}, none).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(w.add_tensor("ok", DType::kQ4_0, {64, 2}, none).ok());
}

TEST(GgufWriterTest, FillErrorsAndSizeMismatchesNameTheTensor) {
  GgufWriter w;
  ASSERT_TRUE(w.add_tensor("f", DType::kF32, {2}, [](std::span<std::byte>) {
                 return Status::io_error("disk gone");
               }).ok());
  auto bytes = w.to_bytes();
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.error().code(), StatusCode::kIoError);
  EXPECT_EQ(bytes.error().message(), "tensor 'f': disk gone");

  GgufWriter w2;
  std::vector<std::byte> three(3);
  ASSERT_TRUE(w2.add_tensor("short", DType::kF32, {2}, three).ok());
  auto b2 = w2.to_bytes();
  ASSERT_FALSE(b2.ok());
  EXPECT_NE(b2.error().message().find("tensor 'short' needs 8 bytes, got 3"), std::string::npos)
      << b2.error().message();
}

TEST(GgufWriterTest, UnusableAlignmentFallsBackToTheDefaultLayout) {
  // Written as given (so tests can make broken files), laid out at 32.
  GgufWriter w;
  w.set("general.alignment", uint64_t{1} << 40);
  std::vector<float> data = {1, 2, 3};
  ASSERT_TRUE(w.add_tensor("a", DType::kF32, {3}, std::as_bytes(std::span(data))).ok());
  ASSERT_TRUE(w.add_tensor("b", DType::kF32, {3}, std::as_bytes(std::span(data))).ok());
  auto bytes = w.to_bytes();
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->size() % kDefaultAlignment, 0u);
  const std::string path = testing::make_temp_dir("gguf-writer") + "/align.gguf";
  ASSERT_TRUE(w.write(path).ok());
  auto f = GgufFile::open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().code(), StatusCode::kCorrupt);
  EXPECT_NE(f.error().message().find("got 1099511627776"), std::string::npos);
}

TEST(GgufWriterTest, ProgressCountsTensors) {
  GgufWriter w = gguf::test_util::small_model();
  std::vector<size_t> done;
  const std::string path = testing::make_temp_dir("gguf-writer") + "/progress.gguf";
  ASSERT_TRUE(w.write(path, nullptr, [&done](size_t d, size_t total) {
                 EXPECT_EQ(total, 3u);
                 done.push_back(d);
               }).ok());
  EXPECT_EQ(done, (std::vector<size_t>{1, 2, 3}));
}

}  // namespace
}  // namespace keel::gguf
