// dequantize_row against the quant fixtures' reference dequantizations (gguf-py output listed in
// reference/dequantized.json): every byte must match, for Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, F16 and
// BF16. Plus hand-built blocks whose values are known in closed form.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "gguf/reader.h"
#include "kernels/kernels.h"
#include "support/test_support.h"

namespace keel::kernels {
namespace {

const char kFixtureDir[] = "models/quant-fixtures/";

TEST(DequantizeTest, MatchesFixtureReferencesBitExactly) {
  KEEL_REQUIRE_SHARED();
  const std::string dir = keel::testing::shared_path(kFixtureDir);
  const std::string json_text = keel::testing::read_file(dir + "reference/dequantized.json");
  ASSERT_FALSE(json_text.empty());
  const nlohmann::json entries = nlohmann::json::parse(json_text);
  std::set<std::string> types_seen;
  for (const auto& e : entries) {
    const std::string file = e.at("file"), tensor = e.at("tensor"), type = e.at("type");
    SCOPED_TRACE(file + " " + tensor + " " + type);
    auto gguf = gguf::GgufFile::open(dir + file);
    ASSERT_TRUE(gguf.ok()) << gguf.error().to_string();
    const gguf::TensorInfo* info = gguf->find_tensor(tensor);
    ASSERT_NE(info, nullptr);
    ASSERT_EQ(dtype_name(info->dtype), type);
    ASSERT_TRUE(matmul_supports(info->dtype));
    const int64_t cols = info->shape[0];
    const int64_t rows = info->num_elements / cols;
    ASSERT_EQ(info->num_elements, e.at("n_elements").get<int64_t>());

    std::vector<float> out(static_cast<size_t>(info->num_elements));
    const auto data = gguf->tensor_data(*info);
    const size_t row_bytes = dtype_row_bytes(info->dtype, cols);
    ASSERT_EQ(data.size(), row_bytes * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(info->dtype, data.data() + static_cast<size_t>(r) * row_bytes,
                     out.data() + r * cols, cols);
    }
    const std::string ref = keel::testing::read_file(dir + "reference/" +
                                                     e.at("dequantized_f32_le").get<std::string>());
    ASSERT_EQ(ref.size(), out.size() * sizeof(float));
    const auto first8 = e.at("first8").get<std::vector<float>>();
    for (size_t i = 0; i < first8.size(); ++i) EXPECT_EQ(out[i], first8[i]) << "element " << i;
    size_t mismatches = 0, first_bad = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      if (std::memcmp(&out[i], ref.data() + 4 * i, 4) != 0 && mismatches++ == 0) first_bad = i;
    }
    EXPECT_EQ(mismatches, 0u) << "first mismatch at element " << first_bad;
    types_seen.insert(type);
  }
  EXPECT_EQ(types_seen,
            (std::set<std::string>{"Q4_0", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "F16", "BF16"}));
}

// A Q4_K block with d = 1, dmin = 0.5, sub-block s having scale s+1 and min s, all nibbles q:
// element e of sub-block s is (s+1)·q − 0.5·s. Exercises the 6-bit scale packing (s ≥ 4 uses
// the high bits).
TEST(DequantizeTest, Q4KScalePacking) {
  std::vector<std::byte> blk(144);
  const uint16_t one = fp32_to_fp16(1.0f), half = fp32_to_fp16(0.5f);
  std::memcpy(blk.data(), &one, 2);
  std::memcpy(blk.data() + 2, &half, 2);
  uint8_t sc[8], m[8];
  for (int s = 0; s < 8; ++s) {
    sc[s] = static_cast<uint8_t>(s + 1 + (s >= 4 ? 32 : 0));  // use bit 5 for the high ones
    m[s] = static_cast<uint8_t>(s + (s >= 4 ? 48 : 0));
  }
  auto* scales = reinterpret_cast<uint8_t*>(blk.data() + 4);
  for (int j = 0; j < 4; ++j) {
    scales[j] = static_cast<uint8_t>((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
    scales[j + 4] = static_cast<uint8_t>((m[j] & 63) | (m[j + 4] >> 4) << 6);
    scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
  }
  auto* qs = reinterpret_cast<uint8_t*>(blk.data() + 16);
  for (int i = 0; i < 128; ++i) qs[i] = static_cast<uint8_t>(3 | 5 << 4);
  std::vector<float> out(256);
  dequantize_row(DType::kQ4_K, blk.data(), out.data(), 256);
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32;
    const int q = s % 2 == 0 ? 3 : 5;
    EXPECT_EQ(out[e], static_cast<float>(sc[s]) * q - 0.5f * m[s]) << "element " << e;
  }
}

TEST(DequantizeTest, Q6KElementOrder) {
  std::vector<std::byte> blk(210);
  auto* ql = reinterpret_cast<uint8_t*>(blk.data());
  auto* qh = reinterpret_cast<uint8_t*>(blk.data() + 128);
  auto* sc = reinterpret_cast<int8_t*>(blk.data() + 192);
  const uint16_t d = fp32_to_fp16(1.0f);
  std::memcpy(blk.data() + 208, &d, 2);
  for (int i = 0; i < 16; ++i) sc[i] = static_cast<int8_t>(i % 2 == 0 ? 1 : -1);
  // Element e gets q = e % 64 (value q − 32), encoded per the documented layout.
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, l = e % 32, g = (e % 128) / 32, q = e % 64;
    const int li = 64 * h + l + (g % 2) * 32;
    ql[li] =
        static_cast<uint8_t>(g < 2 ? (ql[li] & 0xf0) | (q & 15) : (ql[li] & 0x0f) | (q & 15) << 4);
    qh[32 * h + l] = static_cast<uint8_t>(qh[32 * h + l] | (q >> 4) << (2 * g));
  }
  std::vector<float> out(256);
  dequantize_row(DType::kQ6_K, blk.data(), out.data(), 256);
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(out[e], static_cast<float>(sc[e / 16] * (e % 64 - 32))) << "element " << e;
  }
}

}  // namespace
}  // namespace keel::kernels
