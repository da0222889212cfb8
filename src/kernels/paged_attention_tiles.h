// The tile loop of the SIMD paged-attention work units (avx2_attention.cpp, avx512_attention.cpp):
// walk the task's positions in tiles of kAttentionTile, resolve each tile's K/V row addresses
// through the block table (the next tile's are resolved and prefetched while this one computes),
// widen f16 and Q8_0 rows once into scratch (Q8_0: scale · q, exactly as dequantize_row), then per
// query head of the group: scores, running max, online-softmax rescale and the weighted V sum.
// The arithmetic comes from `Tile`, a per-ISA struct with kLanes and static scores / tile_max /
// exp_tile / accumulate_v / widen / widen_q8.
//
// Internal linkage like paged_rows.h: each ISA file instantiates it with its own target flags and
// its own (anonymous-namespace) Tile, so no symbol is shared between instruction sets.
#pragma once

#include <algorithm>
#include <cmath>

#include "kernels/isa_kernels.h"
#include "kernels/paged_rows.h"

namespace keel::kernels {
namespace {

// kType: the KV row type, kF32 (read in place), kF16 or kQ8_0 (widened into scratch).
template <typename Tile, DType kType>
void attend_tiles(const PagedKv& kv, const AttentionHeads& heads, const TokenTask& t) {
  const int64_t group = heads.n_heads / heads.n_kv_heads;
  const int64_t dim = heads.head_dim;
  float* const scores = t.scratch;                               // [group][kAttentionTile]
  float* const k_tile = scores + group * kAttentionTile;         // [kAttentionTile][dim] widened
  float* const v_tile = k_tile + int64_t{kAttentionTile} * dim;  // [kAttentionTile][dim] widened
  std::fill(t.acc, t.acc + group * dim, 0.0f);
  std::fill(t.m, t.m + group, -INFINITY);
  std::fill(t.l, t.l + group, 0.0f);
  const std::byte* tile_rows[2][kAttentionTile];
  const float* krows[kAttentionTile];
  const float* vrows[kAttentionTile];
  const HeadSpan span = paged_head_span(kv, t.kv_head, dim);
  const size_t head_bytes = span.bytes;
  paged_k_rows(kv, t.block_table, t.kv_head, dim, t.kv_begin,
               std::min(kAttentionTile, t.kv_end - t.kv_begin), tile_rows[0]);
  for (int32_t j0 = t.kv_begin, tile = 0; j0 < t.kv_end; j0 += kAttentionTile, tile ^= 1) {
    const int32_t n = std::min(kAttentionTile, t.kv_end - j0);
    const std::byte* const* rows = tile_rows[tile];
    if (const int32_t j1 = j0 + kAttentionTile; j1 < t.kv_end) {  // the next tile's rows
      const int32_t n1 = std::min(kAttentionTile, t.kv_end - j1);
      paged_k_rows(kv, t.block_table, t.kv_head, dim, j1, n1, tile_rows[tile ^ 1]);
      prefetch_rows(tile_rows[tile ^ 1], n1, kv.v_offset, head_bytes);
    }
    for (int32_t j = 0; j < n; ++j) {
      if constexpr (kType == DType::kF16) {
        Tile::widen(rows[j], dim, k_tile + j * dim);
        Tile::widen(rows[j] + kv.v_offset, dim, v_tile + j * dim);
        krows[j] = k_tile + j * dim;
        vrows[j] = v_tile + j * dim;
      } else if constexpr (kType == DType::kQ8_0) {
        Tile::widen_q8(rows[j], span.skip, dim, k_tile + j * dim);
        Tile::widen_q8(rows[j] + kv.v_offset, span.skip, dim, v_tile + j * dim);
        krows[j] = k_tile + j * dim;
        vrows[j] = v_tile + j * dim;
      } else {
        static_assert(kType == DType::kF32);
        krows[j] = reinterpret_cast<const float*>(rows[j]);
        vrows[j] = reinterpret_cast<const float*>(rows[j] + kv.v_offset);
      }
    }
    const int32_t n_blocks = (n + Tile::kLanes - 1) / Tile::kLanes;
    for (int32_t j = n; j < n_blocks * Tile::kLanes; ++j) krows[j] = krows[0];  // scores ignored
    for (int64_t g = 0; g < group; ++g) {
      float* p = scores + g * kAttentionTile;
      for (int32_t b = 0; b < n_blocks; ++b) {
        Tile::scores(t.q + g * dim, krows + b * Tile::kLanes, dim, heads.scale,
                     p + b * Tile::kLanes);
      }
      const float m_new = std::max(t.m[g], Tile::tile_max(p, n));
      const float alpha = t.m[g] == -INFINITY ? 0.0f : std::exp(t.m[g] - m_new);
      t.l[g] = t.l[g] * alpha + Tile::exp_tile(p, n, m_new);
      t.m[g] = m_new;
      Tile::accumulate_v(t.acc + g * dim, alpha, p, n, vrows, dim);
    }
  }
}

}  // namespace
}  // namespace keel::kernels
