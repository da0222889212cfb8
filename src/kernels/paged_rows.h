// Address arithmetic of paged KV storage shared by the paged-attention kernels of every
// instruction set: where one KV head's slice of a row lies (for Q8_0 rows: the 34-byte blocks of
// 32 values that cover it, and how many values of the first block precede it), the K row
// addresses of a run of consecutive positions of one sequence, and a prefetch of those rows.
// Plain C++ with internal linkage, so the per-ISA files (different target flags) never share a
// symbol.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/kernels.h"

namespace keel::kernels {
namespace {

// Q8_0 rows: blocks of kQ8Values values, each an f16 scale followed by kQ8Values int8 (GGML's
// block_q8_0); value = scale · q.
inline constexpr int64_t kQ8Values = 32;
inline constexpr size_t kQ8BlockBytes = 34;

// Bytes of one K or V row (kv.kv_dim values; a multiple of kQ8Values for Q8_0).
inline size_t paged_row_bytes(const PagedKv& kv) {
  switch (kv.dtype) {
    case DType::kF16:
      return static_cast<size_t>(kv.kv_dim) * 2;
    case DType::kQ8_0:
      return static_cast<size_t>(kv.kv_dim / kQ8Values) * kQ8BlockBytes;
    default:
      return static_cast<size_t>(kv.kv_dim) * 4;
  }
}

// One KV head's slice [kv_head·head_dim, (kv_head+1)·head_dim) of a row: it starts `offset` bytes
// into the row and spans `bytes`; for Q8_0 those are the whole blocks covering it and the slice
// starts `skip` values into the first of them (skip is 0 for f32/f16).
struct HeadSpan {
  size_t offset = 0;
  size_t bytes = 0;
  int64_t skip = 0;
};
inline HeadSpan paged_head_span(const PagedKv& kv, int64_t kv_head, int64_t head_dim) {
  const int64_t first = kv_head * head_dim;
  if (kv.dtype == DType::kQ8_0) {
    const int64_t b0 = first / kQ8Values, b1 = (first + head_dim + kQ8Values - 1) / kQ8Values;
    return {static_cast<size_t>(b0) * kQ8BlockBytes, static_cast<size_t>(b1 - b0) * kQ8BlockBytes,
            first % kQ8Values};
  }
  const size_t elem = kv.dtype == DType::kF16 ? 2 : 4;
  return {static_cast<size_t>(first) * elem, static_cast<size_t>(head_dim) * elem, 0};
}

// rows[i] = address of KV head `kv_head`'s K row slice (paged_head_span's offset) at position
// pos + i, for i in [0, n); the V row of the same position is kv.v_offset bytes further. Reads
// block_table only for blocks it uses.
inline void paged_k_rows(const PagedKv& kv, const int32_t* block_table, int64_t kv_head,
                         int64_t head_dim, int32_t pos, int32_t n, const std::byte** rows) {
  const size_t row_bytes = paged_row_bytes(kv);
  const size_t head_offset = paged_head_span(kv, kv_head, head_dim).offset;
  int32_t b = pos / kv.block_size;
  int32_t r = pos % kv.block_size;
  const std::byte* block = kv.base + static_cast<size_t>(block_table[b]) * kv.block_stride;
  for (int32_t i = 0; i < n; ++i) {
    rows[i] = block + static_cast<size_t>(r) * row_bytes + head_offset;
    if (++r == kv.block_size && i + 1 < n) {
      r = 0;
      block = kv.base + static_cast<size_t>(block_table[++b]) * kv.block_stride;
    }
  }
}

// Asks for the K and V rows of one KV head (`bytes` each) at rows[0, n) to be brought into the
// cache, so the next tile's memory arrives while this one computes.
inline void prefetch_rows(const std::byte* const* rows, int32_t n, size_t v_offset, size_t bytes) {
  for (int32_t i = 0; i < n; ++i) {
    for (size_t off = 0; off < bytes; off += 64) {
      __builtin_prefetch(rows[i] + off);
      __builtin_prefetch(rows[i] + v_offset + off);
    }
  }
}

}  // namespace
}  // namespace keel::kernels
