// Roofline probes: the bandwidth probes compute what they claim (sum, triad), the peak probes
// count the operations their micro-kernel performs, and measure_roofline reports a peak only for
// instructions the (possibly restricted) feature set allows. Speeds are not asserted.
#include "kernels/roofline.h"

#include <gtest/gtest.h>

#include <vector>

namespace keel::kernels {
namespace {

bool has_avx2(const CpuFeatures& c) { return c.avx2 && c.fma; }
bool has_avx512(const CpuFeatures& c) {
  return c.avx512f && c.avx512bw && c.avx512vl && c.avx512dq;
}

TEST(RooflineTest, BandwidthProbesComputeTheirResults) {
  if (!has_avx2(detect_cpu_features())) GTEST_SKIP() << "no AVX2 on this CPU";
  const int64_t n = 4096;
  std::vector<float> a(n, 0.0f), b(n), c(n);
  for (int64_t i = 0; i < n; ++i) b[i] = static_cast<float>(i % 7), c[i] = static_cast<float>(i);
  float expected = 0;
  for (float v : b) expected += v;
  EXPECT_EQ(probes::read_avx2(b.data(), n), expected);  // small integers: exact in any order
  probes::triad_avx2(a.data(), b.data(), c.data(), 0.5f, n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(a[i], b[i] + 0.5f * c[i]) << i;
}

TEST(RooflineTest, PeakProbesCountTheirOperations) {
  const CpuFeatures cpu = detect_cpu_features();
  if (!has_avx2(cpu)) GTEST_SKIP() << "no AVX2 on this CPU";
  // 2 × 4 tile of 256-bit vectors over 2 KiB rows = 64 steps; multiply-add = 2.
  EXPECT_EQ(probes::fma_f32_avx2(3), 3.0 * 64 * 8 * 8 * 2);
  EXPECT_EQ(probes::maddubs_avx2(3), 3.0 * 64 * 8 * 32 * 2);
  if (has_avx512(cpu)) {
    // 4 × 4 tile of 512-bit vectors over 2 KiB rows = 32 steps.
    EXPECT_EQ(probes::fma_f32_avx512(3), 3.0 * 32 * 16 * 16 * 2);
    if (cpu.avx512vnni) {
      EXPECT_EQ(probes::dpbusd_avx512(3), 3.0 * 32 * 16 * 64 * 2);
    }
    if (cpu.avx512bf16) {
      EXPECT_EQ(probes::dpbf16_avx512(3), 3.0 * 32 * 16 * 32 * 2);
    }
  }
}

TEST(RooflineTest, ReportsOnlyWhatTheFeaturesAllow) {
  ThreadPool pool(2);
  const RooflineOptions small{.buffer_bytes = int64_t{1} << 20, .reps = 1, .compute_iters = 10};
  CpuFeatures scalar = detect_cpu_features();
  scalar.avx2 = scalar.fma = scalar.avx512f = scalar.avx512vnni = scalar.avx512bf16 = false;
  auto r = measure_roofline(scalar, pool, small);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->threads, 2);
  EXPECT_GT(r->read_gbs_1t, 0);
  EXPECT_GT(r->read_gbs, 0);
  EXPECT_GT(r->triad_gbs, 0);
  EXPECT_EQ(r->fp32_gflops, 0);
  EXPECT_EQ(r->bf16_gflops, 0);
  EXPECT_EQ(r->int8_gops, 0);
  EXPECT_STREQ(r->int8_instruction, "");

  CpuFeatures avx2 = detect_cpu_features();
  if (!has_avx2(avx2)) return;
  avx2.avx512f = avx2.avx512vnni = avx2.avx512bf16 = false;
  r = measure_roofline(avx2, pool, small);
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->fp32_gflops_1t, 0);
  EXPECT_GT(r->int8_gops, 0);
  EXPECT_STREQ(r->int8_instruction, "vpmaddubsw");
  EXPECT_EQ(r->bf16_gflops, 0);

  const CpuFeatures all = detect_cpu_features();
  if (!has_avx512(all) || !all.avx512vnni) return;
  r = measure_roofline(all, pool, small);
  ASSERT_TRUE(r.ok());
  EXPECT_STREQ(r->int8_instruction, "vpdpbusd");
  EXPECT_EQ(r->bf16_gflops > 0, all.avx512bf16);
}

TEST(RooflineTest, RejectsBadOptions) {
  ThreadPool pool(1);
  EXPECT_FALSE(measure_roofline(detect_cpu_features(), pool, {.buffer_bytes = 1000}).ok());
  EXPECT_FALSE(
      measure_roofline(detect_cpu_features(), pool, {.buffer_bytes = int64_t{1} << 20, .reps = 0})
          .ok());
}

}  // namespace
}  // namespace keel::kernels
