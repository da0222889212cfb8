// DType: the element types of tensors, numbered as GGML numbers them (so a GGUF type id is a
// DType value). Quantized types store `block_size` elements in `block_bytes` bytes; a row of n
// elements must be a multiple of the block size. Types that ggml has retired have no entry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace keel {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

struct DTypeInfo {
  DType dtype;
  std::string_view name;  // as llama.cpp prints it, e.g. "Q4_K"
  int64_t block_size;     // elements per block (1 for plain types)
  int64_t block_bytes;    // bytes per block
};

// Info for a raw GGML type id; nullopt for ids that are not (or no longer) types.
std::optional<DTypeInfo> dtype_info(uint32_t raw_type);
// Info for a known DType (always present).
const DTypeInfo& dtype_info(DType dtype);
std::string_view dtype_name(DType dtype);
// Parses a case-insensitive name ("q8_0", "F16"); nullopt when unknown.
std::optional<DType> dtype_from_name(std::string_view name);

// Bytes of a row of n elements; n must be a multiple of the block size (checked).
size_t dtype_row_bytes(DType dtype, int64_t n);

}  // namespace keel
