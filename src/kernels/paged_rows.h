// Address arithmetic of paged KV storage shared by the paged-attention kernels of every
// instruction set: where one KV head's slice of a row lies (for Q8_0 rows: the 34-byte blocks of
// 32 values that cover it, and how many values of the first block precede it), the K row
// addresses of a run of consecutive positions of one sequence, a prefetch of those rows, and the
// loop that runs a row-at-a-time kernel (scalar, AVX2) over the tokens of a work unit.
// Plain C++ with internal linkage, so the per-ISA files (different target flags) never share a
// symbol.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/dispatch.h"
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

// One token of a PagedAttentionTask as a row-at-a-time kernel sees it: its group of query heads
// over positions [kv_begin, kv_end) (non-empty), state written to acc / m / l ([group] each).
struct TokenTask {
  const float* q = nullptr;
  const int32_t* block_table = nullptr;
  int64_t kv_head = 0;
  int32_t kv_begin = 0;
  int32_t kv_end = 0;
  float* acc = nullptr;
  float* m = nullptr;
  float* l = nullptr;
  float* scratch = nullptr;
};

// Runs fn(TokenTask) for each token of t with positions in its range; a token with none gets the
// empty state (m = −∞, l = 0, acc = 0).
template <typename Fn>
void attend_each_token(const PagedAttentionTask& t, int64_t group, int64_t dim, Fn&& fn) {
  for (int32_t i = 0; i < t.n_tok; ++i) {
    TokenTask s;
    s.q = t.q + i * t.q_stride;
    s.block_table = t.block_table;
    s.kv_head = t.kv_head;
    s.kv_begin = t.kv_begin;
    s.kv_end = std::min(t.kv_end, t.n_kv[i]);
    s.acc = t.acc + i * t.acc_stride;
    s.m = t.m + i * group;
    s.l = t.l + i * group;
    s.scratch = t.scratch;
    if (s.kv_end <= s.kv_begin) {
      std::fill(s.acc, s.acc + group * dim, 0.0f);
      std::fill(s.m, s.m + group, -INFINITY);
      std::fill(s.l, s.l + group, 0.0f);
      continue;
    }
    fn(s);
  }
}

}  // namespace
}  // namespace keel::kernels
