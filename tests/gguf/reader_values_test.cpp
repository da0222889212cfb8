// Round trips of every GGUF metadata value type through GgufWriter and GgufFile, in v2 and v3:
// scalars at their extremes, strings (empty, UTF-8, embedded NUL, longer than the reader's
// buffer), arrays of every type, empty arrays, nested arrays, and general.alignment layouts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "gguf_test_util.h"
#include "support/test_support.h"

namespace keel::gguf {
namespace {

using test_util::values_equal;

template <typename T>
Value array_of(ValueType type, std::vector<T> items) {
  return make_array<T>(type, items);
}

Value nested(ValueType type, std::vector<Value> items) {
  Array a;
  a.type = type;
  a.items = std::move(items);
  return Value(std::move(a));
}

// One key per case; the key names the case so a failure says which one broke.
std::vector<KeyValue> all_value_cases() {
  using L8 = std::numeric_limits<int8_t>;
  using L16 = std::numeric_limits<int16_t>;
  using L32 = std::numeric_limits<int32_t>;
  using L64 = std::numeric_limits<int64_t>;
  const float nan_f = std::numeric_limits<float>::quiet_NaN();
  const double inf_d = std::numeric_limits<double>::infinity();
  std::vector<KeyValue> kv = {
      {"u8", uint8_t{255}},
      {"i8", int8_t{L8::min()}},
      {"u16", uint16_t{65535}},
      {"i16", int16_t{L16::min()}},
      {"u32", std::numeric_limits<uint32_t>::max()},
      {"i32", int32_t{L32::min()}},
      {"f32", -0.0f},
      {"f32.nan", nan_f},
      {"bool.true", true},
      {"bool.false", false},
      {"str", "hello"},
      {"str.empty", ""},
      {"str.utf8", "h\xC3\xA9llo \xE2\x9C\x93 \xF0\x9F\x98\x80"},
      {"str.nul", std::string("a\0b", 3)},
      {"u64", std::numeric_limits<uint64_t>::max()},
      {"i64", int64_t{L64::min()}},
      {"f64", -inf_d},
      {"f64.denorm", std::numeric_limits<double>::denorm_min()},
      {"arr.u8", array_of<uint8_t>(ValueType::kUint8, {0, 1, 255})},
      {"arr.i8", array_of<int8_t>(ValueType::kInt8, {L8::min(), 0, L8::max()})},
      {"arr.u16", array_of<uint16_t>(ValueType::kUint16, {0, 65535})},
      {"arr.i16", array_of<int16_t>(ValueType::kInt16, {L16::min(), L16::max()})},
      {"arr.u32", array_of<uint32_t>(ValueType::kUint32, {0, 4000000000u})},
      {"arr.i32", array_of<int32_t>(ValueType::kInt32, {L32::min(), -1, L32::max()})},
      {"arr.f32", array_of<float>(ValueType::kFloat32, {1.5f, nan_f, -0.0f})},
      {"arr.bool", array_of<bool>(ValueType::kBool, {true, false, true})},
      {"arr.str", array_of<std::string>(ValueType::kString, {"", "a", "", "\xE2\x96\x81the"})},
      {"arr.u64",
       array_of<uint64_t>(ValueType::kUint64, {0, std::numeric_limits<uint64_t>::max()})},
      {"arr.i64", array_of<int64_t>(ValueType::kInt64, {L64::min(), L64::max()})},
      {"arr.f64", array_of<double>(ValueType::kFloat64, {inf_d, 1e-300, -2.5})},
  };
  // Empty arrays of every element type, nested arrays included.
  for (uint32_t t = 0; t < kNumValueTypes; ++t) {
    const auto type = static_cast<ValueType>(t);
    kv.push_back({"empty." + std::string(value_type_name(type)), nested(type, {})});
  }
  // Two levels: rows of different lengths, one empty.
  kv.push_back(
      {"nested2.i32", nested(ValueType::kArray, {array_of<int32_t>(ValueType::kInt32, {1, 2, 3}),
                                                 array_of<int32_t>(ValueType::kInt32, {}),
                                                 array_of<int32_t>(ValueType::kInt32, {-4})})});
  // Two levels with different element types per row (each row is its own array).
  kv.push_back({"nested2.mixed",
                nested(ValueType::kArray, {array_of<std::string>(ValueType::kString, {"x", ""}),
                                           array_of<bool>(ValueType::kBool, {false}),
                                           nested(ValueType::kArray, {})})});
  // Three levels of strings.
  kv.push_back(
      {"nested3.str",
       nested(ValueType::kArray,
              {nested(ValueType::kArray, {array_of<std::string>(ValueType::kString, {"a", "bb"}),
                                          array_of<std::string>(ValueType::kString, {""})}),
               nested(ValueType::kArray, {array_of<std::string>(ValueType::kString, {})})})});
  return kv;
}

void expect_metadata_equal(const GgufFile& f, const std::vector<KeyValue>& expected) {
  ASSERT_EQ(f.metadata().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(f.metadata()[i].key, expected[i].key);
    EXPECT_TRUE(values_equal(f.metadata()[i].value, expected[i].value)) << expected[i].key;
    const Value* found = f.find(expected[i].key);
    ASSERT_NE(found, nullptr) << expected[i].key;
    EXPECT_EQ(found, &f.metadata()[i].value);
  }
}

class ValueRoundTripTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(ValueRoundTripTest, EveryValueTypeSurvivesWriteAndRead) {
  const uint32_t version = GetParam();
  const std::vector<KeyValue> cases = all_value_cases();
  GgufWriter w(version);
  for (const auto& kv : cases) w.set(kv.key, kv.value);
  const std::string path =
      keel::testing::make_temp_dir("gguf-values") + "/v" + std::to_string(version) + ".gguf";
  ASSERT_TRUE(w.write(path).ok());
  for (DataMode mode : {DataMode::kRead, DataMode::kMmap, DataMode::kNone}) {
    auto f = GgufFile::open(path, {.mode = mode});
    ASSERT_TRUE(f.ok()) << f.error().to_string();
    EXPECT_EQ(f->version(), version);
    EXPECT_TRUE(f->tensors().empty());
    EXPECT_FALSE(f->has_data());
    expect_metadata_equal(*f, cases);
  }
}

TEST_P(ValueRoundTripTest, TypedGettersSeeTheValues) {
  GgufWriter w(GetParam());
  for (const auto& kv : all_value_cases()) w.set(kv.key, kv.value);
  const std::string path = keel::testing::make_temp_dir("gguf-getters") + "/g.gguf";
  ASSERT_TRUE(w.write(path).ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  EXPECT_EQ(*f->get_int("u8"), 255);
  EXPECT_EQ(*f->get_int("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f->get_int("u64").error().code(), StatusCode::kInvalidArgument);  // > INT64_MAX
  EXPECT_TRUE(std::signbit(*f->get_float("f32")));
  EXPECT_TRUE(std::isnan(*f->get_float("f32.nan")));
  EXPECT_EQ(*f->get_float("u16"), 65535.0);
  EXPECT_TRUE(*f->get_bool("bool.true"));
  EXPECT_FALSE(*f->get_bool("bool.false"));
  EXPECT_EQ(f->get_bool("u8").error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*f->get_string("str.nul"), std::string("a\0b", 3));
  EXPECT_EQ(*f->get_string("str.empty"), "");
  EXPECT_EQ((*f->get_array("arr.str"))->items.size(), 4u);
  EXPECT_EQ((*f->get_array("empty.array"))->type, ValueType::kArray);
  EXPECT_EQ(f->get_string("missing").error().code(), StatusCode::kNotFound);
  const std::string msg = f->get_string("u32").error().message();
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("'u32'"), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(Versions, ValueRoundTripTest, ::testing::Values(2u, 3u));

TEST(GgufValuesTest, StringsLongerThanTheReadBufferRoundTrip) {
  // The reader buffers 1 MiB at a time; these cross several refills, and the tensor after them
  // must still be found at the right place.
  std::string big(3 * (1 << 20) + 17, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  GgufWriter w;
  w.set("big", big);
  w.set("after", array_of<std::string>(ValueType::kString, {big.substr(0, 1 << 20), "x"}));
  std::vector<float> data = {1, 2, 3, 4};
  ASSERT_TRUE(w.add_tensor("t", DType::kF32, {4}, std::as_bytes(std::span(data))).ok());
  const std::string path = keel::testing::make_temp_dir("gguf-big") + "/big.gguf";
  ASSERT_TRUE(w.write(path).ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  EXPECT_EQ(*f->get_string("big"), big);
  EXPECT_EQ((*f->get_array("after"))->items[0].as_string()->size(), size_t{1} << 20);
  auto bytes = f->tensor_data(*f->find_tensor("t"));
  ASSERT_EQ(bytes.size(), 16u);
  EXPECT_EQ(std::memcmp(bytes.data(), data.data(), 16), 0);
}

class AlignmentTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(AlignmentTest, TensorsAreLaidOutAtTheFileAlignment) {
  const uint32_t align = GetParam();
  GgufWriter w;
  w.set("general.alignment", align);
  std::vector<std::vector<float>> data = {{1, 2, 3}, {4}, {5, 6, 7, 8, 9}};
  const std::vector<std::string> names = {"t0", "t1", "t2"};
  for (size_t i = 0; i < data.size(); ++i) {
    ASSERT_TRUE(w.add_tensor(names[i], DType::kF32, {static_cast<int64_t>(data[i].size())},
                             std::as_bytes(std::span(data[i])))
                    .ok());
  }
  const std::string path = keel::testing::make_temp_dir("gguf-align") + "/a.gguf";
  ASSERT_TRUE(w.write(path).ok());
  for (DataMode mode : {DataMode::kRead, DataMode::kMmap}) {
    auto f = GgufFile::open(path, {.mode = mode});
    ASSERT_TRUE(f.ok()) << f.error().to_string();
    EXPECT_EQ(f->alignment(), align);
    EXPECT_EQ(f->data_offset() % align, 0u);
    for (size_t i = 0; i < data.size(); ++i) {
      const TensorInfo* t = f->find_tensor(names[i]);
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(t->offset % align, 0u);
      EXPECT_EQ(t->num_elements, static_cast<int64_t>(data[i].size()));
      auto bytes = f->tensor_data(*t);
      ASSERT_EQ(bytes.size(), data[i].size() * 4);
      EXPECT_EQ(std::memcmp(bytes.data(), data[i].data(), bytes.size()), 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Alignments, AlignmentTest, ::testing::Values(1u, 8u, 64u, 4096u));

}  // namespace
}  // namespace keel::gguf
