// Ops::paged_attention: splits a batch of query tokens into work units — (token, KV head, chunk
// of kPagedKvChunk positions) — that pool threads take from a shared counter (the batch's last
// tokens, usually the longest, first), runs the table's kernel on each, and normalises the
// result. A token split into several chunks is merged, in chunk order, by whichever thread
// finishes its last chunk: out = Σ_c e^(m_c − M)·acc_c / Σ_c e^(m_c − M)·l_c with M = max_c m_c.
// The chunking depends only on the token's n_kv, so results do not depend on the batch or the
// thread count. Calls with little work run on the calling thread.
#include <algorithm>
#include <atomic>
#include <cmath>

#include "core/check.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/ops_scratch.h"

namespace keel::kernels {
namespace {

// Below this many query·key multiply-adds (Σ n_kv · n_heads · head_dim) a call runs on the
// calling thread: a pool hand-off would cost more than it saves.
constexpr int64_t kParallelWork = 1 << 16;

// Fills units / splits for the queries; returns the number of partial accumulators (units of
// split tokens) and sets *total_kv = Σ n_kv.
int32_t plan_units(const PagedQueries& queries, int64_t n_kv_heads,
                   std::vector<AttentionUnit>* units, std::vector<AttentionSplit>* splits,
                   int64_t* total_kv) {
  units->clear();
  splits->clear();
  *total_kv = 0;
  int32_t n_partial = 0;
  for (int64_t i = 0; i < queries.n_q; ++i) {
    const int32_t n_kv = queries.n_kv[i];
    KEEL_CHECK(n_kv >= 1);
    *total_kv += n_kv;
    const int32_t n_chunks = (n_kv + kPagedKvChunk - 1) / kPagedKvChunk;
    for (int64_t g = 0; g < n_kv_heads; ++g) {
      int32_t split = -1;
      if (n_chunks > 1) {
        split = static_cast<int32_t>(splits->size());
        splits->push_back({static_cast<int32_t>(units->size()), n_chunks, n_partial});
        n_partial += n_chunks;
      }
      for (int32_t c = 0; c < n_chunks; ++c) {
        units->push_back({static_cast<int32_t>(i), static_cast<int32_t>(g), c * kPagedKvChunk,
                          std::min(n_kv, (c + 1) * kPagedKvChunk), split});
      }
    }
  }
  return n_partial;
}

// One call's state, shared read-only by the workers (each writes disjoint outputs).
struct AttentionRun {
  const PagedKv* kv;
  const AttentionHeads* heads;
  const PagedQueries* queries;
  PagedAttentionFn fn;
  int64_t group, dim;
  const AttentionUnit* units;
  const AttentionSplit* splits;
  std::atomic<int32_t>* pending;  // [splits] units not finished
  float* ml;                      // [units][2·group]
  float* partial;                 // [partials][group·dim]

  // The output rows of a unit's (token, KV head): its group of query heads.
  [[nodiscard]] float* out_of(const AttentionUnit& u) const {
    return queries->out + u.token * queries->out_stride + u.kv_head * group * dim;
  }
  [[nodiscard]] float* partial_of(const AttentionSplit& sp, int64_t ui) const {
    return partial + (sp.partial + (ui - sp.first_unit)) * group * dim;
  }

  // Runs unit ui with the thread's kernel scratch.
  void run(int64_t ui, float* scratch) const {
    const AttentionUnit& u = units[ui];
    PagedAttentionTask task;
    task.q = queries->q + u.token * queries->q_stride + u.kv_head * group * dim;
    task.block_table = queries->block_tables[u.token];
    task.kv_head = u.kv_head;
    task.kv_begin = u.kv_begin;
    task.kv_end = u.kv_end;
    task.m = ml + ui * 2 * group;
    task.l = task.m + group;
    task.scratch = scratch;
    if (u.split < 0) {
      task.acc = out_of(u);
      fn(*kv, *heads, task);
      for (int64_t h = 0; h < group; ++h) {
        const float inv = 1.0f / task.l[h];
        for (int64_t d = 0; d < dim; ++d) task.acc[h * dim + d] *= inv;
      }
      return;
    }
    const AttentionSplit& sp = splits[u.split];
    task.acc = partial_of(sp, ui);
    fn(*kv, *heads, task);
    if (pending[u.split].fetch_sub(1, std::memory_order_acq_rel) == 1) merge(sp);
  }

  void merge(const AttentionSplit& sp) const {
    float* out = out_of(units[sp.first_unit]);
    for (int64_t h = 0; h < group; ++h) {
      float m_max = -INFINITY, l_sum = 0.0f;
      for (int32_t c = 0; c < sp.n_units; ++c) {
        m_max = std::max(m_max, ml[(sp.first_unit + c) * 2 * group + h]);
      }
      for (int32_t c = 0; c < sp.n_units; ++c) {
        const float* m = ml + (sp.first_unit + c) * 2 * group;
        l_sum += m[group + h] * std::exp(m[h] - m_max);
      }
      float* o = out + h * dim;
      std::fill(o, o + dim, 0.0f);
      for (int32_t c = 0; c < sp.n_units; ++c) {
        const float* m = ml + (sp.first_unit + c) * 2 * group;
        const float w = std::exp(m[h] - m_max) / l_sum;
        const float* acc = partial_of(sp, sp.first_unit + c) + h * dim;
        for (int64_t d = 0; d < dim; ++d) o[d] += w * acc[d];
      }
    }
  }
};

}  // namespace

void Ops::paged_attention(const PagedKv& kv, const AttentionHeads& heads,
                          const PagedQueries& queries) {
  KEEL_CHECK(kv.dtype == DType::kF32 || kv.dtype == DType::kF16 || kv.dtype == DType::kQ8_0);
  KEEL_CHECK(kv.dtype != DType::kQ8_0 || kv.kv_dim % 32 == 0);
  KEEL_CHECK(heads.n_kv_heads > 0 && heads.head_dim > 0 && heads.n_heads % heads.n_kv_heads == 0);
  KEEL_CHECK(kv.kv_dim == heads.n_kv_heads * heads.head_dim && kv.block_size >= 1);
  KEEL_CHECK(queries.n_q >= 0);
  if (queries.n_q == 0 || heads.n_heads == 0) return;
  Scratch& s = *scratch_;
  AttentionRun run;
  run.kv = &kv;
  run.heads = &heads;
  run.queries = &queries;
  run.fn = kv.dtype == DType::kF16    ? table_->paged_attention_f16
           : kv.dtype == DType::kQ8_0 ? table_->paged_attention_q8_0
                                      : table_->paged_attention_f32;
  run.group = heads.n_heads / heads.n_kv_heads;
  run.dim = heads.head_dim;
  int64_t total_kv = 0;
  const int32_t n_partial = plan_units(queries, heads.n_kv_heads, &s.units, &s.splits, &total_kv);
  const auto n_units = static_cast<int64_t>(s.units.size());
  run.units = s.units.data();
  run.splits = s.splits.data();
  run.ml = grow(s.ml, n_units * 2 * run.group);
  run.partial = grow(s.partial, int64_t{n_partial} * run.group * run.dim);
  if (s.pending_size < s.splits.size()) {
    s.pending = std::make_unique<std::atomic<int32_t>[]>(s.splits.size());
    s.pending_size = s.splits.size();
  }
  for (size_t i = 0; i < s.splits.size(); ++i) {
    s.pending[i].store(s.splits[i].n_units, std::memory_order_relaxed);
  }
  run.pending = s.pending.get();

  const bool parallel = n_units > 1 && total_kv * heads.n_heads * run.dim >= kParallelWork;
  const int nth = parallel ? pool_->num_threads() : 1;
  const int64_t per_thread = paged_attention_scratch_floats(run.group, run.dim);
  float* thread_scratch = grow(s.thread, nth * per_thread);
  std::atomic<int64_t> next{0};
  const auto work = [&](int thread_idx) {
    for (int64_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < n_units;) {
      run.run(n_units - 1 - k, thread_scratch + thread_idx * per_thread);
    }
  };
  if (nth == 1) {
    work(0);
  } else {
    pool_->run([&](int idx, int) { work(idx); });
  }
}

}  // namespace keel::kernels
