// Instruction-set tiers and dispatch tables: names, support checks against feature sets, the
// forced-tier choice (CLI / KEEL_ISA) with its errors, and table selection in Ops.
#include "kernels/dispatch.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "core/thread_pool.h"

namespace keel::kernels {
namespace {

CpuFeatures avx2_only() {
  CpuFeatures c;
  c.avx2 = c.fma = c.f16c = true;
  return c;
}

CpuFeatures avx512_full() {
  CpuFeatures c = avx2_only();
  c.avx512f = c.avx512bw = c.avx512vl = c.avx512dq = c.avx512vnni = c.avx512bf16 = true;
  return c;
}

TEST(DispatchTest, NamesRoundTrip) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    EXPECT_EQ(isa_from_name(isa_name(isa)), isa);
  }
  EXPECT_EQ(isa_from_name("AVX2"), std::nullopt);
  EXPECT_EQ(isa_from_name("sse"), std::nullopt);
}

TEST(DispatchTest, SupportFollowsFeatures) {
  EXPECT_TRUE(isa_supported(Isa::kScalar, CpuFeatures{}));
  EXPECT_FALSE(isa_supported(Isa::kAvx2, CpuFeatures{}));
  EXPECT_TRUE(isa_supported(Isa::kAvx2, avx2_only()));
  EXPECT_FALSE(isa_supported(Isa::kAvx512, avx2_only()));
  CpuFeatures no_vnni = avx512_full();
  no_vnni.avx512vnni = false;
  EXPECT_FALSE(isa_supported(Isa::kAvx512, no_vnni));
  EXPECT_EQ(best_isa(no_vnni), Isa::kAvx2);
  EXPECT_EQ(best_isa(avx512_full()), Isa::kAvx512);
  EXPECT_EQ(best_isa(CpuFeatures{}), Isa::kScalar);
}

TEST(DispatchTest, ChooseIsa) {
  EXPECT_EQ(*choose_isa(avx512_full(), std::nullopt), Isa::kAvx512);
  EXPECT_EQ(*choose_isa(avx512_full(), std::string_view("")), Isa::kAvx512);
  EXPECT_EQ(*choose_isa(avx512_full(), std::string_view("avx2")), Isa::kAvx2);
  EXPECT_EQ(*choose_isa(avx2_only(), std::string_view("scalar")), Isa::kScalar);
  const auto unknown = choose_isa(avx512_full(), std::string_view("avx1024"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.error().message().find("avx1024"), std::string::npos);
  const auto missing = choose_isa(avx2_only(), std::string_view("avx512"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), StatusCode::kUnsupported);
  EXPECT_NE(missing.error().message().find("AVX512_VNNI"), std::string::npos);
}

TEST(DispatchTest, ChooseIsaFromEnv) {
  ASSERT_EQ(setenv("KEEL_ISA", "scalar", 1), 0);
  EXPECT_EQ(*choose_isa_from_env(avx512_full()), Isa::kScalar);
  ASSERT_EQ(setenv("KEEL_ISA", "bogus", 1), 0);
  const auto bad = choose_isa_from_env(avx512_full());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("KEEL_ISA"), std::string::npos);
  ASSERT_EQ(unsetenv("KEEL_ISA"), 0);
  EXPECT_EQ(*choose_isa_from_env(avx2_only()), Isa::kAvx2);
}

TEST(DispatchTest, TablesAreCompleteAndSelectedByFeatures) {
  for (const KernelTable* t : all_tables()) {
    for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                    DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
      EXPECT_NE(matmul_kernel(*t, d), nullptr) << t->name << " " << dtype_name(d);
    }
    EXPECT_EQ(matmul_kernel(*t, DType::kQ4_1), nullptr);
    EXPECT_NE(t->quantize_q8_0, nullptr);
    EXPECT_NE(t->quantize_q8_k, nullptr);
    EXPECT_NE(t->rms_norm, nullptr);
    EXPECT_NE(t->silu_mul, nullptr);
    EXPECT_NE(t->add, nullptr);
    EXPECT_NE(t->paged_attention_f32, nullptr);
    EXPECT_NE(t->paged_attention_f16, nullptr);
    EXPECT_NE(t->paged_attention_q8_0, nullptr);
    EXPECT_GE(t->row_tile, 1);
  }
  EXPECT_STREQ(kernel_table(Isa::kAvx512, avx512_full()).name, "avx512-bf16");
  CpuFeatures no_bf16 = avx512_full();
  no_bf16.avx512bf16 = false;
  EXPECT_STREQ(kernel_table(Isa::kAvx512, no_bf16).name, "avx512");
  EXPECT_STREQ(kernel_table(Isa::kAvx2, avx512_full()).name, "avx2");
  EXPECT_TRUE(table_supported(avx512_table(), no_bf16));
  EXPECT_FALSE(table_supported(avx512_bf16_table(), no_bf16));
}

TEST(DispatchTest, OpsUsesTheChosenTable) {
  const CpuFeatures cpu = detect_cpu_features();
  ThreadPool pool(1);
  Ops scalar(Isa::kScalar, &pool, cpu);
  EXPECT_EQ(scalar.kernel_name(), "scalar");
  EXPECT_EQ(scalar.isa(), Isa::kScalar);
  const Isa best = best_isa(cpu);
  Ops ops(best, &pool);
  EXPECT_EQ(ops.kernel_name(), kernel_table(best, cpu).name);
}

TEST(DispatchDeathTest, UnsupportedTierAborts) {
  EXPECT_DEATH(kernel_table(Isa::kAvx512, avx2_only()), "lacks");
}

}  // namespace
}  // namespace keel::kernels
