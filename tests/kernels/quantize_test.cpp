// quantize_row: bit-exactness against llama-quantize's output on the quant fixtures (F32 source
// → F16 / BF16 / Q8_0 / Q4_0 tensors), the dequantize → re-quantize round trip of those tensors,
// and the quantize → dequantize error bounds on random data (including ties and zero blocks).
// Also the Q8_0 / Q8_K activation quantizers: SIMD tables bit-identical to the scalar ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "gguf/reader.h"
#include "kernel_test_util.h"
#include "kernels/blocks.h"
#include "kernels/isa_kernels.h"
#include "support/test_support.h"

namespace keel::kernels {
namespace {

const char kQuantFixtureDir[] = "models/quant-fixtures/";

// Row count and length of a 2-D (or 1-D) tensor.
std::pair<int64_t, int64_t> rows_cols(const gguf::TensorInfo& info) {
  return {info.num_elements / info.shape[0], info.shape[0]};
}

// Quantizing the F32 fixture's tensors reproduces llama-quantize's bytes for every tensor of
// `dtype` in `file` (llama-quantize without an importance matrix uses the reference quantizers).
void expect_matches_llama_quantize(const std::string& file, DType dtype) {
  const std::string dir = keel::testing::shared_path(kQuantFixtureDir);
  auto src = gguf::GgufFile::open(dir + "fixture-f32.gguf");
  ASSERT_TRUE(src.ok()) << src.error().to_string();
  auto dst = gguf::GgufFile::open(dir + file);
  ASSERT_TRUE(dst.ok()) << dst.error().to_string();
  int checked = 0;
  for (const gguf::TensorInfo& q : dst->tensors()) {
    if (q.dtype != dtype) continue;
    const gguf::TensorInfo* f = src->find_tensor(q.name);
    ASSERT_NE(f, nullptr) << q.name;
    ASSERT_EQ(f->dtype, DType::kF32);
    const auto [rows, cols] = rows_cols(q);
    const size_t row_bytes = dtype_row_bytes(dtype, cols);
    const auto* x = reinterpret_cast<const float*>(src->tensor_data(*f).data());
    const auto want = dst->tensor_data(q);
    std::vector<std::byte> got(row_bytes * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      quantize_row(dtype, x + r * cols, got.data() + static_cast<size_t>(r) * row_bytes, cols);
    }
    ASSERT_EQ(want.size(), got.size()) << q.name;
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), got.size())) << file << " " << q.name;
    ++checked;
  }
  EXPECT_GT(checked, 0) << "no " << dtype_name(dtype) << " tensors in " << file;
}

TEST(QuantizeTest, MatchesLlamaQuantizeOnFixtures) {
  KEEL_REQUIRE_SHARED();
  expect_matches_llama_quantize("fixture-f16.gguf", DType::kF16);
  expect_matches_llama_quantize("fixture-bf16.gguf", DType::kBF16);
  expect_matches_llama_quantize("fixture-q8_0.gguf", DType::kQ8_0);
  expect_matches_llama_quantize("fixture-q4_0.gguf", DType::kQ4_0);
}

// Dequantize then re-quantize gives back the stored bytes. Exact by construction: the reference
// quantizers put the block's extreme at q = ±127 (Q8_0) or q = −8 (Q4_0), so the re-derived
// scale equals the stored fp16 scale and every x/d lands within rounding of its integer.
TEST(QuantizeTest, FixtureRoundTripIsExact) {
  KEEL_REQUIRE_SHARED();
  const std::string dir = keel::testing::shared_path(kQuantFixtureDir);
  const std::pair<const char*, DType> cases[] = {{"fixture-q8_0.gguf", DType::kQ8_0},
                                                 {"fixture-q4_0.gguf", DType::kQ4_0},
                                                 {"fixture-f16.gguf", DType::kF16},
                                                 {"fixture-bf16.gguf", DType::kBF16}};
  for (const auto& [file, dtype] : cases) {
    auto gguf = gguf::GgufFile::open(dir + file);
    ASSERT_TRUE(gguf.ok()) << gguf.error().to_string();
    int checked = 0;
    for (const gguf::TensorInfo& info : gguf->tensors()) {
      if (info.dtype != dtype) continue;
      const auto [rows, cols] = rows_cols(info);
      const size_t row_bytes = dtype_row_bytes(dtype, cols);
      const auto data = gguf->tensor_data(info);
      std::vector<float> f(static_cast<size_t>(cols));
      std::vector<std::byte> back(row_bytes);
      for (int64_t r = 0; r < rows; ++r) {
        const std::byte* row = data.data() + static_cast<size_t>(r) * row_bytes;
        dequantize_row(dtype, row, f.data(), cols);
        quantize_row(dtype, f.data(), back.data(), cols);
        ASSERT_EQ(0, std::memcmp(row, back.data(), row_bytes))
            << file << " " << info.name << " row " << r;
      }
      ++checked;
    }
    EXPECT_GT(checked, 0) << file;
  }
}

// Per block: Q8_0 |x − y| ≤ d·(0.5 + 127·2^-11) with d = amax/127 (rounding, plus the fp16
// scale); Q4_0 |x − y| ≤ |d|·(1 + 8·2^-11) with d = max/−8 (the +|max| side clamps 8 → 7).
TEST(QuantizeTest, RoundTripErrorBounds) {
  std::mt19937 rng(5);
  for (DType dtype : {DType::kQ8_0, DType::kQ4_0}) {
    const int64_t n = 32 * 64;
    std::vector<float> x = testing::random_floats(rng, n, 1.0f);
    std::fill(x.begin(), x.begin() + 32, 0.0f);  // an all-zero block
    for (int j = 0; j < 32; ++j) x[32 + j] = static_cast<float>(j - 16) + 0.5f;  // ties
    std::vector<std::byte> q(dtype_row_bytes(dtype, n));
    quantize_row(dtype, x.data(), q.data(), n);
    std::vector<float> y(static_cast<size_t>(n));
    dequantize_row(dtype, q.data(), y.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
      const float bound = dtype == DType::kQ8_0 ? amax / 127 * (0.5f + 127.0f / 2048)
                                                : amax / 8 * (1.0f + 8.0f / 2048);
      for (int j = 0; j < 32; ++j) {
        const int64_t i = b * 32 + j;
        ASSERT_LE(std::fabs(x[i] - y[i]), bound * 1.0001f)
            << dtype_name(dtype) << " block " << b << " element " << j;
      }
    }
    for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.0f);
  }
}

TEST(QuantizeTest, Q4KRoundTripIsWithinHalfAStepPerSubBlock) {
  // make-model's Q4_K: each 32-element sub-block gets its own 6-bit scale and offset, so a
  // sub-block of small values keeps small errors next to one of large values, and the packing of
  // scales and nibbles must match the dequantizer (a mixed-up index shows as a whole-range error).
  std::mt19937 rng(11);
  const int64_t n = kQKK * 4;
  std::vector<float> x = testing::random_floats(rng, n, 1.0f);
  for (int64_t i = 0; i < n; ++i) x[i] *= static_cast<float>(1 + (i / 32) % 8);  // 1× .. 8×
  std::fill(x.begin() + kQKK, x.begin() + 2 * kQKK, 0.0f);  // an all-zero super-block
  for (int64_t i = 2 * kQKK; i < 2 * kQKK + 32; ++i) x[i] = std::fabs(x[i]);  // no negatives
  ASSERT_TRUE(quantize_supports(DType::kQ4_K));
  std::vector<std::byte> q(dtype_row_bytes(DType::kQ4_K, n));
  quantize_row(DType::kQ4_K, x.data(), q.data(), n);
  std::vector<float> y(static_cast<size_t>(n));
  dequantize_row(DType::kQ4_K, q.data(), y.data(), n);
  for (int64_t b = 0; b < n / kQKK; ++b) {
    float max_scale = 0, max_offset = 0, scale[8];
    for (int s = 0; s < 8; ++s) {
      const float* xs = x.data() + b * kQKK + 32 * s;
      const float lo = std::min(0.0f, *std::min_element(xs, xs + 32));
      const float hi = std::max(0.0f, *std::max_element(xs, xs + 32));
      scale[s] = (hi - lo) / 15;
      max_scale = std::max(max_scale, scale[s]);
      max_offset = std::max(max_offset, -lo);
    }
    for (int s = 0; s < 8; ++s) {
      const float bound = 0.5f * scale[s] + 2 * max_scale / 63 + max_offset / 63 + 1e-6f;
      for (int l = 0; l < 32; ++l) {
        const int64_t i = b * kQKK + 32 * s + l;
        ASSERT_LE(std::fabs(x[i] - y[i]), bound) << "super-block " << b << " sub-block " << s;
      }
    }
  }
  for (int64_t i = kQKK; i < 2 * kQKK; ++i) EXPECT_EQ(y[i], 0.0f);
}

TEST(QuantizeTest, Q8_0TiesRoundAwayFromZero) {
  // amax = 127 → d = 1 exactly, so x/d = x: 2.5 → 3 and −3.5 → −4 (roundf, not nearest-even).
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -3.5f;
  x[3] = 0.5f;
  std::vector<std::byte> q(34);
  quantize_row(DType::kQ8_0, x.data(), q.data(), 32);
  const auto* qs = reinterpret_cast<const int8_t*>(q.data() + 2);
  EXPECT_EQ(qs[0], 127);
  EXPECT_EQ(qs[1], 3);
  EXPECT_EQ(qs[2], -4);
  EXPECT_EQ(qs[3], 1);
}

TEST(QuantizeTest, ActivationQuantizersAreBitIdenticalAcrossTables) {
  std::mt19937 rng(11);
  const int64_t n = 256 * 5;
  std::vector<float> x = testing::random_floats(rng, n, 2.0f);
  std::fill(x.begin() + 256, x.begin() + 512, 0.0f);  // zero blocks of both sizes
  for (int j = 0; j < 32; ++j) x[512 + j] = static_cast<float>(j - 16) + 0.5f;  // ties, amax 15.5
  x[544] = 127.0f;  // d = 1 for the next block: x/d = x exactly
  for (int j = 1; j < 32; ++j) x[544 + j] = static_cast<float>(j % 7) - 3.5f;
  for (int j = 1024; j < 1280; ++j) x[j] *= 0.1f;  // last super-block: ±3 tie for the max,
  x[1030] = -3.0f;                                 // the first (negative) one sets the sign
  x[1040] = 3.0f;
  std::vector<int8_t> qs_ref(n), qs(n);
  std::vector<float> d_ref(n / 32), d(n / 32);
  std::vector<int32_t> sum_ref(n / 32), sum(n / 32);
  scalar::quantize_q8_0(x.data(), n, qs_ref.data(), d_ref.data(), sum_ref.data());
  std::vector<int16_t> bs_ref(n / 16), bs(n / 16);
  std::vector<float> dk_ref(n / 256), dk(n / 256);
  std::vector<int8_t> qk_ref(n);
  scalar::quantize_q8_k(x.data(), n, qk_ref.data(), dk_ref.data(), bs_ref.data());
  EXPECT_EQ(qs_ref[544 + 1], -3);  // −2.5 rounds away from zero
  for (const KernelTable* t : testing::runnable_tables(detect_cpu_features())) {
    t->quantize_q8_0(x.data(), n, qs.data(), d.data(), sum.data());
    EXPECT_EQ(qs, qs_ref) << t->name;
    EXPECT_EQ(0, std::memcmp(d.data(), d_ref.data(), d.size() * 4)) << t->name;
    EXPECT_EQ(sum, sum_ref) << t->name;
    std::vector<int8_t> qk(n);
    t->quantize_q8_k(x.data(), n, qk.data(), dk.data(), bs.data());
    EXPECT_EQ(qk, qk_ref) << t->name;
    EXPECT_EQ(0, std::memcmp(dk.data(), dk_ref.data(), dk.size() * 4)) << t->name;
    EXPECT_EQ(bs, bs_ref) << t->name;
  }
  EXPECT_EQ(dk_ref[1], 0.0f);  // all-zero super-block
  EXPECT_GT(dk_ref[4], 0.0f);  // max = −3 → d = 3/127
  EXPECT_EQ(qk_ref[1030], -127);
  EXPECT_EQ(qk_ref[1040], 127);
}

// Activation rounding for F16 / BF16 weights: every table bit-identical to fp32_to_fp16 /
// fp32_to_bf16, including subnormals, overflow to inf, ties, signed zeros; NaN stays NaN.
TEST(QuantizeTest, HalfRoundingIsBitIdenticalAcrossTables) {
  std::mt19937 rng(21);
  std::vector<float> x = testing::random_floats(rng, 1000, 3.0f);
  const float edge[] = {0.0f,
                        -0.0f,
                        1e-6f,
                        -3e-7f,
                        1e-40f,
                        65504.0f,
                        65519.0f,
                        65520.0f,
                        -70000.0f,
                        1e30f,
                        INFINITY,
                        -INFINITY,
                        1.0f + std::ldexp(1.0f, -11),
                        1.0f + 3 * std::ldexp(1.0f, -11),
                        1.0f + std::ldexp(1.0f, -8),
                        3.0e38f,
                        std::ldexp(1.0f, -130)};
  std::copy(std::begin(edge), std::end(edge), x.begin());
  x[100] = NAN;
  const int64_t n = static_cast<int64_t>(x.size()) - 3;  // odd length: exercises the tails
  for (bool bf16 : {false, true}) {
    std::vector<uint16_t> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = bf16 ? fp32_to_bf16(x[i]) : fp32_to_fp16(x[i]);
    for (const KernelTable* t : testing::runnable_tables(detect_cpu_features())) {
      std::vector<uint16_t> bits(n);
      std::vector<float> rounded(n);
      (bf16 ? t->round_bf16 : t->round_f16)(x.data(), n, bits.data(), rounded.data());
      for (int64_t i = 0; i < n; ++i) {
        const float back = bf16 ? bf16_to_fp32(want[i]) : fp16_to_fp32(want[i]);
        if (std::isnan(x[i])) {
          EXPECT_TRUE(std::isnan(rounded[i])) << t->name;
          continue;
        }
        ASSERT_EQ(bits[i], want[i]) << t->name << (bf16 ? " bf16 " : " f16 ") << "x=" << x[i];
        ASSERT_EQ(std::memcmp(&rounded[i], &back, 4), 0) << t->name << " x=" << x[i];
      }
    }
  }
}

TEST(QuantizeTest, Q8KMatchesGgmlDefinition) {
  // max is the signed value of largest magnitude: here −4 (first), so d = 1/(−127/−4) > 0.
  std::vector<float> x(256, 1.0f);
  x[3] = -4.0f;
  x[7] = 4.0f;
  std::vector<int8_t> qs(256);
  float d = 0;
  std::vector<int16_t> bsums(16);
  scalar::quantize_q8_k(x.data(), 256, qs.data(), &d, bsums.data());
  EXPECT_FLOAT_EQ(d, 4.0f / 127.0f);
  EXPECT_EQ(qs[3], -127);
  EXPECT_EQ(qs[7], 127);
  EXPECT_EQ(qs[0], 32);  // 31.75 → 32
  EXPECT_EQ(bsums[0], 32 * 14 - 127 + 127);
}

}  // namespace
}  // namespace keel::kernels
