// Scalar reference of the paged-attention work unit (see PagedAttentionTask in dispatch.h), one
// token at a time: per tile of kAttentionTile positions, the scores of every head of the group,
// then one online-softmax update (running max m, sum l, rescaled accumulator) and the weighted V
// rows. f16 rows are widened with fp16_to_fp32, Q8_0 values read as scale · q (the head's slice may
// start inside a block: paged_head_span). The SIMD twins follow the same tiling.
//
// Pure functions; thread-safe.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/isa_kernels.h"
#include "kernels/paged_rows.h"

namespace keel::kernels::scalar {
namespace {

// Value d of a head's slice that starts at `row`, `skip` values into its first Q8_0 block.
template <DType kType>
float load(const std::byte* row, int64_t skip, int64_t d) {
  if constexpr (kType == DType::kF16) {
    uint16_t h;
    std::memcpy(&h, row + d * 2, 2);
    return fp16_to_fp32(h);
  } else if constexpr (kType == DType::kQ8_0) {
    const int64_t e = skip + d;
    const std::byte* block = row + static_cast<size_t>(e / kQ8Values) * kQ8BlockBytes;
    uint16_t h;
    std::memcpy(&h, block, 2);
    return fp16_to_fp32(h) * static_cast<float>(static_cast<int8_t>(block[2 + e % kQ8Values]));
  } else {
    float f;
    std::memcpy(&f, row + d * 4, 4);
    return f;
  }
}

template <DType kType>
void attend(const PagedKv& kv, const AttentionHeads& heads, const TokenTask& t) {
  const int64_t group = heads.n_heads / heads.n_kv_heads;
  const int64_t dim = heads.head_dim;
  std::fill(t.acc, t.acc + group * dim, 0.0f);
  std::fill(t.m, t.m + group, -INFINITY);
  std::fill(t.l, t.l + group, 0.0f);
  const std::byte* rows[kAttentionTile];
  const int64_t skip = paged_head_span(kv, t.kv_head, dim).skip;
  for (int32_t j0 = t.kv_begin; j0 < t.kv_end; j0 += kAttentionTile) {
    const int32_t n = std::min(kAttentionTile, t.kv_end - j0);
    paged_k_rows(kv, t.block_table, t.kv_head, dim, j0, n, rows);
    for (int32_t j = 0; j < n; ++j) {
      for (int64_t g = 0; g < group; ++g) {
        const float* q = t.q + g * dim;
        float dot = 0.0f;
        for (int64_t d = 0; d < dim; ++d) dot += q[d] * load<kType>(rows[j], skip, d);
        t.scratch[g * kAttentionTile + j] = dot * heads.scale;
      }
    }
    for (int64_t g = 0; g < group; ++g) {
      float* p = t.scratch + g * kAttentionTile;
      const float m_new = std::max(t.m[g], *std::max_element(p, p + n));
      const float alpha = t.m[g] == -INFINITY ? 0.0f : std::exp(t.m[g] - m_new);
      float sum = 0.0f;
      for (int32_t j = 0; j < n; ++j) sum += (p[j] = std::exp(p[j] - m_new));
      t.l[g] = t.l[g] * alpha + sum;
      t.m[g] = m_new;
      float* acc = t.acc + g * dim;
      if (alpha != 1.0f) {
        for (int64_t d = 0; d < dim; ++d) acc[d] *= alpha;
      }
      for (int32_t j = 0; j < n; ++j) {
        const std::byte* v = rows[j] + kv.v_offset;
        for (int64_t d = 0; d < dim; ++d) acc[d] += p[j] * load<kType>(v, skip, d);
      }
    }
  }
}

}  // namespace

void paged_attention_f32(const PagedKv& kv, const AttentionHeads& heads,
                         const PagedAttentionTask& task) {
  attend_each_token(task, heads.n_heads / heads.n_kv_heads, heads.head_dim,
                    [&](const TokenTask& t) { attend<DType::kF32>(kv, heads, t); });
}

void paged_attention_f16(const PagedKv& kv, const AttentionHeads& heads,
                         const PagedAttentionTask& task) {
  attend_each_token(task, heads.n_heads / heads.n_kv_heads, heads.head_dim,
                    [&](const TokenTask& t) { attend<DType::kF16>(kv, heads, t); });
}

void paged_attention_q8_0(const PagedKv& kv, const AttentionHeads& heads,
                          const PagedAttentionTask& task) {
  attend_each_token(task, heads.n_heads / heads.n_kv_heads, heads.head_dim,
                    [&](const TokenTask& t) { attend<DType::kQ8_0>(kv, heads, t); });
}

}  // namespace keel::kernels::scalar
