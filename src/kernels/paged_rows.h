// Address arithmetic of paged KV storage shared by the paged-attention kernels of every
// instruction set: the K row addresses of a run of consecutive positions of one sequence, and a
// prefetch of those rows. Plain
// C++ with internal linkage, so the per-ISA files (different target flags) never share a symbol.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/kernels.h"

namespace keel::kernels {
namespace {

// Bytes per KV element: 2 for kF16, else 4 (kF32).
inline size_t paged_elem_bytes(const PagedKv& kv) { return kv.dtype == DType::kF16 ? 2 : 4; }

// rows[i] = address of KV head `kv_head`'s K row at position pos + i, for i in [0, n); the V row
// of the same position is kv.v_offset bytes further. Reads block_table only for blocks it uses.
inline void paged_k_rows(const PagedKv& kv, const int32_t* block_table, int64_t kv_head,
                         int64_t head_dim, int32_t pos, int32_t n, const std::byte** rows) {
  const size_t elem = paged_elem_bytes(kv);
  const size_t row_bytes = static_cast<size_t>(kv.kv_dim) * elem;
  const size_t head_offset = static_cast<size_t>(kv_head * head_dim) * elem;
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
