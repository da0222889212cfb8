// Ops::paged_attention: splits a batch of query tokens into work units — (token, KV head, chunk
// of kPagedKvChunk positions) — that pool threads take from a shared counter (longest-waiting
// tokens last in the batch go first), runs the table's kernel on each, and normalises the result.
// A token split into several chunks is merged, in chunk order, by whichever thread finishes its
// last chunk: out = Σ_c e^(m_c − M)·acc_c / Σ_c e^(m_c − M)·l_c with M = max_c m_c. The chunking
// depends only on the token's n_kv, so results do not depend on the batch or the thread count.
#include <algorithm>
#include <atomic>
#include <cmath>

#include "core/check.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/ops_scratch.h"

namespace keel::kernels {
void Ops::paged_attention(const PagedKv& kv, const AttentionHeads& heads,
                          const PagedQueries& queries) {
  KEEL_CHECK(kv.dtype == DType::kF32 || kv.dtype == DType::kF16);
  KEEL_CHECK(heads.n_kv_heads > 0 && heads.head_dim > 0 && heads.n_heads % heads.n_kv_heads == 0);
  KEEL_CHECK(kv.kv_dim == heads.n_kv_heads * heads.head_dim && kv.block_size >= 1);
  KEEL_CHECK(queries.n_q >= 0);
  if (queries.n_q == 0 || heads.n_heads == 0) return;
  const PagedAttentionFn fn =
      kv.dtype == DType::kF16 ? table_->paged_attention_f16 : table_->paged_attention_f32;
  const int64_t group = heads.n_heads / heads.n_kv_heads;
  const int64_t dim = heads.head_dim;
  Scratch& s = *scratch_;

  // Work units, split tokens and their partial accumulators.
  s.units.clear();
  s.splits.clear();
  int32_t n_partial = 0;
  for (int64_t i = 0; i < queries.n_q; ++i) {
    const int32_t n_kv = queries.n_kv[i];
    KEEL_CHECK(n_kv >= 1);
    const int32_t n_chunks = (n_kv + kPagedKvChunk - 1) / kPagedKvChunk;
    for (int64_t g = 0; g < heads.n_kv_heads; ++g) {
      int32_t split = -1;
      if (n_chunks > 1) {
        split = static_cast<int32_t>(s.splits.size());
        s.splits.push_back({static_cast<int32_t>(s.units.size()), n_chunks, n_partial});
        n_partial += n_chunks;
      }
      for (int32_t c = 0; c < n_chunks; ++c) {
        s.units.push_back({static_cast<int32_t>(i), static_cast<int32_t>(g), c * kPagedKvChunk,
                           std::min(n_kv, (c + 1) * kPagedKvChunk), split});
      }
    }
  }
  const auto n_units = static_cast<int64_t>(s.units.size());
  float* ml = grow(s.ml, n_units * 2 * group);
  float* partial = grow(s.partial, int64_t{n_partial} * group * dim);
  const int nth = n_units > 1 ? pool_->num_threads() : 1;
  const int64_t per_thread = paged_attention_scratch_floats(group, dim);
  float* thread_scratch = grow(s.thread, nth * per_thread);
  if (s.pending_size < s.splits.size()) {
    s.pending = std::make_unique<std::atomic<int32_t>[]>(s.splits.size());
    s.pending_size = s.splits.size();
  }
  for (size_t i = 0; i < s.splits.size(); ++i) {
    s.pending[i].store(s.splits[i].n_units, std::memory_order_relaxed);
  }

  // out row of (token, KV head): its group of query heads.
  const auto out_of = [&](const AttentionUnit& u) {
    return queries.out + u.token * queries.out_stride + u.kv_head * group * dim;
  };
  const auto merge = [&](const AttentionSplit& sp) {
    const AttentionUnit& u0 = s.units[static_cast<size_t>(sp.first_unit)];
    float* out = out_of(u0);
    for (int64_t h = 0; h < group; ++h) {
      float m_max = -INFINITY, l_sum = 0.0f;
      for (int32_t c = 0; c < sp.n_units; ++c)
        m_max = std::max(m_max, ml[(sp.first_unit + c) * 2 * group + h]);
      for (int32_t c = 0; c < sp.n_units; ++c) {
        const float* m = ml + (sp.first_unit + c) * 2 * group;
        l_sum += m[group + h] * std::exp(m[h] - m_max);
      }
      float* o = out + h * dim;
      std::fill(o, o + dim, 0.0f);
      for (int32_t c = 0; c < sp.n_units; ++c) {
        const float* m = ml + (sp.first_unit + c) * 2 * group;
        const float w = std::exp(m[h] - m_max) / l_sum;
        const float* acc = partial + (int64_t{sp.partial} + c) * group * dim + h * dim;
        for (int64_t d = 0; d < dim; ++d) o[d] += w * acc[d];
      }
    }
  };

  std::atomic<int64_t> next{0};
  const auto work = [&](int thread_idx) {
    PagedAttentionTask task;
    task.scratch = thread_scratch + thread_idx * per_thread;
    for (int64_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < n_units;) {
      const int64_t ui = n_units - 1 - k;
      const AttentionUnit& u = s.units[static_cast<size_t>(ui)];
      task.q = queries.q + u.token * queries.q_stride + u.kv_head * group * dim;
      task.block_table = queries.block_tables[u.token];
      task.kv_head = u.kv_head;
      task.kv_begin = u.kv_begin;
      task.kv_end = u.kv_end;
      task.m = ml + ui * 2 * group;
      task.l = task.m + group;
      if (u.split < 0) {
        task.acc = out_of(u);
        fn(kv, heads, task);
        for (int64_t h = 0; h < group; ++h) {
          const float inv = 1.0f / task.l[h];
          for (int64_t d = 0; d < dim; ++d) task.acc[h * dim + d] *= inv;
        }
        continue;
      }
      const AttentionSplit& sp = s.splits[static_cast<size_t>(u.split)];
      task.acc = partial + (int64_t{sp.partial} + (ui - sp.first_unit)) * group * dim;
      fn(kv, heads, task);
      if (s.pending[static_cast<size_t>(u.split)].fetch_sub(1, std::memory_order_acq_rel) == 1) {
        merge(sp);
      }
    }
  };
  if (nth == 1) {
    work(0);
  } else {
    pool_->run([&](int idx, int) { work(idx); });
  }
}

}  // namespace keel::kernels
