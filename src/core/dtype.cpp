// The GGML type table: names, block sizes and block byte counts (from ggml-common.h layouts).
#include "core/dtype.h"

#include <array>
#include <cctype>

#include "core/check.h"

namespace keel {
namespace {

constexpr std::array kTypes = {
    DTypeInfo{DType::kF32, "F32", 1, 4},
    DTypeInfo{DType::kF16, "F16", 1, 2},
    DTypeInfo{DType::kQ4_0, "Q4_0", 32, 18},
    DTypeInfo{DType::kQ4_1, "Q4_1", 32, 20},
    DTypeInfo{DType::kQ5_0, "Q5_0", 32, 22},
    DTypeInfo{DType::kQ5_1, "Q5_1", 32, 24},
    DTypeInfo{DType::kQ8_0, "Q8_0", 32, 34},
    DTypeInfo{DType::kQ8_1, "Q8_1", 32, 36},
    DTypeInfo{DType::kQ2_K, "Q2_K", 256, 84},
    DTypeInfo{DType::kQ3_K, "Q3_K", 256, 110},
    DTypeInfo{DType::kQ4_K, "Q4_K", 256, 144},
    DTypeInfo{DType::kQ5_K, "Q5_K", 256, 176},
    DTypeInfo{DType::kQ6_K, "Q6_K", 256, 210},
    DTypeInfo{DType::kQ8_K, "Q8_K", 256, 292},
    DTypeInfo{DType::kIQ2_XXS, "IQ2_XXS", 256, 66},
    DTypeInfo{DType::kIQ2_XS, "IQ2_XS", 256, 74},
    DTypeInfo{DType::kIQ3_XXS, "IQ3_XXS", 256, 98},
    DTypeInfo{DType::kIQ1_S, "IQ1_S", 256, 50},
    DTypeInfo{DType::kIQ4_NL, "IQ4_NL", 32, 18},
    DTypeInfo{DType::kIQ3_S, "IQ3_S", 256, 110},
    DTypeInfo{DType::kIQ2_S, "IQ2_S", 256, 82},
    DTypeInfo{DType::kIQ4_XS, "IQ4_XS", 256, 136},
    DTypeInfo{DType::kI8, "I8", 1, 1},
    DTypeInfo{DType::kI16, "I16", 1, 2},
    DTypeInfo{DType::kI32, "I32", 1, 4},
    DTypeInfo{DType::kI64, "I64", 1, 8},
    DTypeInfo{DType::kF64, "F64", 1, 8},
    DTypeInfo{DType::kIQ1_M, "IQ1_M", 256, 56},
    DTypeInfo{DType::kBF16, "BF16", 1, 2},
    DTypeInfo{DType::kTQ1_0, "TQ1_0", 256, 54},
    DTypeInfo{DType::kTQ2_0, "TQ2_0", 256, 66},
    DTypeInfo{DType::kMXFP4, "MXFP4", 32, 17},
};

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace

std::optional<DTypeInfo> dtype_info(uint32_t raw_type) {
  for (const auto& t : kTypes) {
    if (static_cast<uint32_t>(t.dtype) == raw_type) return t;
  }
  return std::nullopt;
}

const DTypeInfo& dtype_info(DType dtype) {
  for (const auto& t : kTypes) {
    if (t.dtype == dtype) return t;
  }
  KEEL_CHECK_MSG(false, "DType value outside the type table");
  __builtin_unreachable();
}

std::string_view dtype_name(DType dtype) { return dtype_info(dtype).name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& t : kTypes) {
    if (iequals(t.name, name)) return t.dtype;
  }
  return std::nullopt;
}

size_t dtype_row_bytes(DType dtype, int64_t n) {
  const DTypeInfo& info = dtype_info(dtype);
  KEEL_CHECK(n >= 0 && n % info.block_size == 0);
  return static_cast<size_t>(n / info.block_size * info.block_bytes);
}

}  // namespace keel
