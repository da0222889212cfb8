// The instruction-set tiers (names, support checks, choice from a forced name) and the dispatch
// tables. This file is compiled for the baseline ISA: the tables only hold the addresses of the
// SIMD kernels, nothing here executes SIMD code.
#include "kernels/dispatch.h"

#include <cstdlib>
#include <string>

#include "core/check.h"
#include "kernels/grouped_via_rows.h"
#include "kernels/isa_kernels.h"

namespace keel::kernels {
namespace {

constexpr KernelTable kScalarTable = {
    .name = "scalar",
    .isa = Isa::kScalar,
    .needs_bf16 = false,
    .row_tile = 1,
    .matmul_f32 = scalar::matmul_f32,
    .matmul_f16 = scalar::matmul_f16,
    .matmul_bf16 = scalar::matmul_bf16,
    .matmul_q8_0 = scalar::matmul_q8_0,
    .matmul_q4_0 = scalar::matmul_q4_0,
    .matmul_q4_k = scalar::matmul_q4_k,
    .matmul_q5_k = scalar::matmul_q5_k,
    .matmul_q6_k = scalar::matmul_q6_k,
    .grouped_q8_0 = grouped_via_rows<scalar::matmul_q8_0>,
    .grouped_q4_0 = grouped_via_rows<scalar::matmul_q4_0>,
    .grouped_q4_k = grouped_via_rows<scalar::matmul_q4_k>,
    .grouped_q5_k = grouped_via_rows<scalar::matmul_q5_k>,
    .grouped_q6_k = grouped_via_rows<scalar::matmul_q6_k>,
    .quantize_q8_0 = scalar::quantize_q8_0,
    .quantize_q8_k = scalar::quantize_q8_k,
    .round_f16 = scalar::round_f16,
    .round_bf16 = scalar::round_bf16,
    .rms_norm = scalar::rms_norm,
    .silu_mul = scalar::silu_mul,
    .add = scalar::add,
    .paged_attention_f32 = scalar::paged_attention_f32,
    .paged_attention_f16 = scalar::paged_attention_f16,
    .paged_attention_q8_0 = scalar::paged_attention_q8_0,
};

constexpr KernelTable kAvx2Table = {
    .name = "avx2",
    .isa = Isa::kAvx2,
    .needs_bf16 = false,
    .row_tile = 8,
    .matmul_f32 = avx2::matmul_f32,
    .matmul_f16 = avx2::matmul_f16,
    .matmul_bf16 = avx2::matmul_bf16,
    .matmul_q8_0 = avx2::matmul_q8_0,
    .matmul_q4_0 = avx2::matmul_q4_0,
    .matmul_q4_k = avx2::matmul_q4_k,
    .matmul_q5_k = avx2::matmul_q5_k,
    .matmul_q6_k = avx2::matmul_q6_k,
    .grouped_q8_0 = avx2::grouped_q8_0,
    .grouped_q4_0 = avx2::grouped_q4_0,
    .grouped_q4_k = avx2::grouped_q4_k,
    .grouped_q5_k = avx2::grouped_q5_k,
    .grouped_q6_k = avx2::grouped_q6_k,
    .quantize_q8_0 = avx2::quantize_q8_0,
    .quantize_q8_k = avx2::quantize_q8_k,
    .round_f16 = avx2::round_f16,
    .round_bf16 = avx2::round_bf16,
    .rms_norm = avx2::rms_norm,
    .silu_mul = avx2::silu_mul,
    .add = avx2::add,
    .paged_attention_f32 = avx2::paged_attention_f32,
    .paged_attention_f16 = avx2::paged_attention_f16,
    .paged_attention_q8_0 = avx2::paged_attention_q8_0,
};

constexpr KernelTable kAvx512Table = {
    .name = "avx512",
    .isa = Isa::kAvx512,
    .needs_bf16 = false,
    .row_tile = 16,
    .matmul_f32 = avx512::matmul_f32,
    .matmul_f16 = avx512::matmul_f16,
    .matmul_bf16 = avx512::matmul_bf16,
    .matmul_q8_0 = avx512::matmul_q8_0,
    .matmul_q4_0 = avx512::matmul_q4_0,
    .matmul_q4_k = avx512::matmul_q4_k,
    .matmul_q5_k = avx512::matmul_q5_k,
    .matmul_q6_k = avx512::matmul_q6_k,
    .grouped_q8_0 = avx512::grouped_q8_0,
    .grouped_q4_0 = avx512::grouped_q4_0,
    .grouped_q4_k = avx512::grouped_q4_k,
    .grouped_q5_k = avx512::grouped_q5_k,
    .grouped_q6_k = avx512::grouped_q6_k,
    .quantize_q8_0 = avx512::quantize_q8_0,
    .quantize_q8_k = avx512::quantize_q8_k,
    .round_f16 = avx512::round_f16,
    .round_bf16 = avx512::round_bf16,
    .rms_norm = avx512::rms_norm,
    .silu_mul = avx512::silu_mul,
    .add = avx512::add,
    .paged_attention_f32 = avx512::paged_attention_f32,
    .paged_attention_f16 = avx512::paged_attention_f16,
    .paged_attention_q8_0 = avx512::paged_attention_q8_0,
};

constexpr KernelTable kAvx512Bf16Table = {
    .name = "avx512-bf16",
    .isa = Isa::kAvx512,
    .needs_bf16 = true,
    .row_tile = 16,
    .matmul_f32 = avx512::matmul_f32,
    .matmul_f16 = avx512::matmul_f16,
    .matmul_bf16 = avx512bf16::matmul_bf16,
    .matmul_q8_0 = avx512::matmul_q8_0,
    .matmul_q4_0 = avx512::matmul_q4_0,
    .matmul_q4_k = avx512::matmul_q4_k,
    .matmul_q5_k = avx512::matmul_q5_k,
    .matmul_q6_k = avx512::matmul_q6_k,
    .grouped_q8_0 = avx512::grouped_q8_0,
    .grouped_q4_0 = avx512::grouped_q4_0,
    .grouped_q4_k = avx512::grouped_q4_k,
    .grouped_q5_k = avx512::grouped_q5_k,
    .grouped_q6_k = avx512::grouped_q6_k,
    .quantize_q8_0 = avx512::quantize_q8_0,
    .quantize_q8_k = avx512::quantize_q8_k,
    .round_f16 = avx512::round_f16,
    .round_bf16 = avx512::round_bf16,
    .rms_norm = avx512::rms_norm,
    .silu_mul = avx512::silu_mul,
    .add = avx512::add,
    .paged_attention_f32 = avx512::paged_attention_f32,
    .paged_attention_f16 = avx512::paged_attention_f16,
    .paged_attention_q8_0 = avx512::paged_attention_q8_0,
};

// Space-separated names of the features `isa` needs that `cpu` lacks.
std::string missing_features(Isa isa, const CpuFeatures& cpu) {
  std::string out;
  auto need = [&out](bool have, const char* name) {
    if (have) return;
    if (!out.empty()) out += ' ';
    out += name;
  };
  if (isa == Isa::kScalar) return out;
  need(cpu.avx2, "AVX2");
  need(cpu.fma, "FMA");
  need(cpu.f16c, "F16C");
  if (isa == Isa::kAvx2) return out;
  need(cpu.avx512f, "AVX512F");
  need(cpu.avx512bw, "AVX512BW");
  need(cpu.avx512vl, "AVX512VL");
  need(cpu.avx512dq, "AVX512DQ");
  need(cpu.avx512vnni, "AVX512_VNNI");
  return out;
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

std::optional<Isa> isa_from_name(std::string_view name) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (isa_name(isa) == name) return isa;
  }
  return std::nullopt;
}

bool isa_supported(Isa isa, const CpuFeatures& cpu) { return missing_features(isa, cpu).empty(); }

Isa best_isa(const CpuFeatures& cpu) {
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2}) {
    if (isa_supported(isa, cpu)) return isa;
  }
  return Isa::kScalar;
}

Result<Isa> choose_isa(const CpuFeatures& cpu, std::optional<std::string_view> forced) {
  if (!forced.has_value() || forced->empty()) return best_isa(cpu);
  const std::optional<Isa> isa = isa_from_name(*forced);
  if (!isa.has_value()) {
    return Status::invalid_argument("unknown instruction set '" + std::string(*forced) +
                                    "' (expected scalar, avx2 or avx512)");
  }
  const std::string missing = missing_features(*isa, cpu);
  if (!missing.empty()) {
    return Status::unsupported("instruction set '" + std::string(*forced) +
                               "' needs CPU features this machine lacks: " + missing);
  }
  return *isa;
}

Result<Isa> choose_isa_from_env(const CpuFeatures& cpu) {
  const char* env = std::getenv("KEEL_ISA");
  if (env == nullptr) return choose_isa(cpu, std::nullopt);
  Result<Isa> isa = choose_isa(cpu, std::string_view(env));
  if (!isa.ok()) return isa.error().with_prefix("KEEL_ISA");
  return isa;
}

const KernelTable& scalar_table() { return kScalarTable; }
const KernelTable& avx2_table() { return kAvx2Table; }
const KernelTable& avx512_table() { return kAvx512Table; }
const KernelTable& avx512_bf16_table() { return kAvx512Bf16Table; }

bool table_supported(const KernelTable& table, const CpuFeatures& cpu) {
  return isa_supported(table.isa, cpu) && (!table.needs_bf16 || cpu.avx512bf16);
}

const KernelTable& kernel_table(Isa isa, const CpuFeatures& cpu) {
  KEEL_CHECK_MSG(isa_supported(isa, cpu), "kernel_table: the CPU lacks the requested ISA");
  switch (isa) {
    case Isa::kScalar:
      return kScalarTable;
    case Isa::kAvx2:
      return kAvx2Table;
    case Isa::kAvx512:
      return cpu.avx512bf16 ? kAvx512Bf16Table : kAvx512Table;
  }
  return kScalarTable;
}

std::vector<const KernelTable*> all_tables() {
  return {&kScalarTable, &kAvx2Table, &kAvx512Table, &kAvx512Bf16Table};
}

MatmulFn matmul_kernel(const KernelTable& table, DType dtype, WeightLayout layout) {
  if (layout == WeightLayout::kGrouped16) {
    switch (dtype) {
      case DType::kQ8_0:
        return table.grouped_q8_0;
      case DType::kQ4_0:
        return table.grouped_q4_0;
      case DType::kQ4_K:
        return table.grouped_q4_k;
      case DType::kQ5_K:
        return table.grouped_q5_k;
      case DType::kQ6_K:
        return table.grouped_q6_k;
      default:
        return nullptr;
    }
  }
  switch (dtype) {
    case DType::kF32:
      return table.matmul_f32;
    case DType::kF16:
      return table.matmul_f16;
    case DType::kBF16:
      return table.matmul_bf16;
    case DType::kQ8_0:
      return table.matmul_q8_0;
    case DType::kQ4_0:
      return table.matmul_q4_0;
    case DType::kQ4_K:
      return table.matmul_q4_k;
    case DType::kQ5_K:
      return table.matmul_q5_k;
    case DType::kQ6_K:
      return table.matmul_q6_k;
    default:
      return nullptr;
  }
}

}  // namespace keel::kernels
