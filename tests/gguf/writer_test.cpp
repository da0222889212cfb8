#include "gguf/writer.h"

#include <gtest/gtest.h>

#include <cstring>

#include "gguf/reader.h"
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

}  // namespace
}  // namespace keel::gguf
