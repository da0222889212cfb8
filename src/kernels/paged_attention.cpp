// Ops::paged_attention: splits a batch of query tokens into work units that pool threads take
// from a shared counter (the batch's last units, usually the longest, first), runs the table's
// kernel on each, and normalises the result.
//
// Units. Consecutive tokens of one sequence (a prefill) form tiles of up to kQueryTile tokens;
// a tile's unit per KV head walks the chunks of kPagedKvChunk positions of [0, its longest n_kv)
// in order. A single token longer than one chunk is split instead: one unit per chunk, computed
// in parallel (flash-decoding) and merged by whichever thread finishes the last. Either way a
// row's chunks are combined in chunk order by one function, fold_chunk:
//   M' = max(M, m_c),  O = O·e^(M − M') + acc_c·e^(m_c − M'),  L = L·e^(M − M') + l_c·e^(m_c − M')
// and the output is O · (1/L). A chunk where a row has no position is skipped (folding it would
// change nothing). The kernels compute each row independently of the tile's other rows, so a
// token's bits depend only on its own inputs: not on the batch, its tile or the thread count.
// Calls with little work run on the calling thread. With state outputs (PagedQueries::state_m/l)
// the last step leaves each row unnormalised and stores its M and L instead, and
// merge_attention_parts folds such partial rows of disjoint position ranges with fold_chunk: the
// decode half of context parallelism, where each member holds a shard of a sequence's positions.
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

// Fills units / splits for the queries; returns the number of partial accumulators (chunks of
// split tokens) and sets *total_kv = Σ n_kv.
int32_t plan_units(const PagedQueries& queries, int64_t n_kv_heads,
                   std::vector<AttentionUnit>* units, std::vector<AttentionSplit>* splits,
                   int64_t* total_kv) {
  units->clear();
  splits->clear();
  *total_kv = 0;
  int32_t n_partial = 0;
  for (int64_t i = 0; i < queries.n_q;) {
    int32_t n_tok = 1, n_kv = queries.n_kv[i];
    while (i + n_tok < queries.n_q && n_tok < kQueryTile &&
           queries.block_tables[i + n_tok] == queries.block_tables[i]) {
      n_kv = std::max(n_kv, queries.n_kv[i + n_tok]);
      ++n_tok;
    }
    for (int32_t t = 0; t < n_tok; ++t) {
      KEEL_CHECK(queries.n_kv[i + t] >= 1);
      *total_kv += queries.n_kv[i + t];
    }
    const int32_t n_chunks = (n_kv + kPagedKvChunk - 1) / kPagedKvChunk;
    const auto token = static_cast<int32_t>(i);
    for (int64_t g = 0; g < n_kv_heads; ++g) {
      const auto head = static_cast<int32_t>(g);
      if (n_tok > 1 || n_chunks == 1) {
        units->push_back({token, n_tok, head, 0, n_kv, -1});
        continue;
      }
      splits->push_back({static_cast<int32_t>(units->size()), n_chunks, n_partial});
      n_partial += n_chunks;
      for (int32_t c = 0; c < n_chunks; ++c) {
        units->push_back({token, 1, head, c * kPagedKvChunk,
                          std::min(n_kv, (c + 1) * kPagedKvChunk),
                          static_cast<int32_t>(splits->size() - 1)});
      }
    }
    i += n_tok;
  }
  return n_partial;
}

// Folds chunk state (acc_c, m_c, l_c) of one row into its running state (o, *m, *l); see the
// file comment. One out-of-line definition, so every caller gets the same bits.
[[gnu::noinline]] void fold_chunk(float* o, float* m, float* l, const float* acc_c, float m_c,
                                  float l_c, int64_t dim) {
  const float mx = std::max(*m, m_c);
  const float a = std::exp(*m - mx), b = std::exp(m_c - mx);
  for (int64_t d = 0; d < dim; ++d) o[d] = o[d] * a + acc_c[d] * b;
  *l = *l * a + l_c * b;
  *m = mx;
}

void normalise(float* o, float l_sum, int64_t dim) {
  const float inv = 1.0f / l_sum;
  for (int64_t d = 0; d < dim; ++d) o[d] *= inv;
}

// One call's state, shared read-only by the workers (each writes disjoint outputs).
struct AttentionRun {
  const PagedKv* kv;
  const AttentionHeads* heads;
  const PagedQueries* queries;
  PagedAttentionFn fn;
  int64_t group, dim;
  int64_t kernel_scratch;  // floats of a thread's scratch the kernel uses; a chunk's state follows
  const AttentionUnit* units;
  const AttentionSplit* splits;
  std::atomic<int32_t>* pending;  // [splits] units not finished
  float* ml;                      // [units][2·kQueryTile·group]
  float* partial;                 // [partials][group·dim]

  // The output rows of a unit's first token (its group of query heads of the unit's KV head).
  [[nodiscard]] float* out_of(const AttentionUnit& u) const {
    return queries->out + u.token * queries->out_stride + u.kv_head * group * dim;
  }
  [[nodiscard]] float* partial_of(const AttentionSplit& sp, int64_t ui) const {
    return partial + (sp.partial + (ui - sp.first_unit)) * group * dim;
  }
  [[nodiscard]] float* ml_of(int64_t ui) const { return ml + ui * 2 * kQueryTile * group; }

  [[nodiscard]] PagedAttentionTask task_of(const AttentionUnit& u, float* scratch) const {
    PagedAttentionTask task;
    task.q = queries->q + u.token * queries->q_stride + u.kv_head * group * dim;
    task.q_stride = queries->q_stride;
    task.n_tok = u.n_tok;
    task.n_kv = queries->n_kv + u.token;
    task.block_table = queries->block_tables[u.token];
    task.kv_head = u.kv_head;
    task.kv_begin = u.kv_begin;
    task.kv_end = u.kv_end;
    task.scratch = scratch;
    return task;
  }

  // Runs unit ui with the thread's scratch.
  void run(int64_t ui, float* scratch) const {
    const AttentionUnit& u = units[ui];
    PagedAttentionTask task = task_of(u, scratch);
    if (u.split >= 0) {
      const AttentionSplit& sp = splits[u.split];
      task.acc = partial_of(sp, ui);
      task.acc_stride = group * dim;
      task.m = ml_of(ui);
      task.l = task.m + group;
      fn(*kv, *heads, task);
      if (pending[u.split].fetch_sub(1, std::memory_order_acq_rel) == 1) merge(sp);
      return;
    }
    run_chunks(u, ui, task, scratch + kernel_scratch);
  }

  // A whole unit: its chunks in order, the first straight into the output rows, the others into
  // `chunk` ([kQueryTile·group·dim] acc, then m and l) and folded in.
  void run_chunks(const AttentionUnit& u, int64_t ui, PagedAttentionTask task, float* chunk) const {
    const int64_t rows = u.n_tok * group;
    float* const out = out_of(u);
    float* const m = ml_of(ui);
    float* const l = m + rows;
    float* const chunk_m = chunk + kQueryTile * group * dim;
    float* const chunk_l = chunk_m + rows;
    for (int32_t c0 = u.kv_begin; c0 < u.kv_end; c0 += kPagedKvChunk) {
      task.kv_begin = c0;
      task.kv_end = std::min(u.kv_end, c0 + kPagedKvChunk);
      const bool first = c0 == u.kv_begin;
      task.acc = first ? out : chunk;
      task.acc_stride = first ? queries->out_stride : group * dim;
      task.m = first ? m : chunk_m;
      task.l = first ? l : chunk_l;
      fn(*kv, *heads, task);
      if (first) continue;
      for (int64_t r = 0; r < rows; ++r) {
        if (chunk_l[r] == 0.0f) continue;  // no position of this row in the chunk
        const int64_t t = r / group, h = r % group;
        fold_chunk(out + t * queries->out_stride + h * dim, m + r, l + r, chunk + r * dim,
                   chunk_m[r], chunk_l[r], dim);
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      finish_row(out + (r / group) * queries->out_stride + (r % group) * dim, u.token + r / group,
                 u.kv_head * group + r % group, m[r], l[r]);
    }
  }

  // A row's last step: normalised, or with state outputs left as it is and its m, l stored.
  void finish_row(float* o, int64_t token, int64_t head, float m, float l_sum) const {
    if (queries->state_m != nullptr) {
      const int64_t at = token * heads->n_heads + head;
      queries->state_m[at] = m;
      queries->state_l[at] = l_sum;
      return;
    }
    normalise(o, l_sum, dim);
  }

  // A split token: its chunks folded in order into the output rows, then normalised.
  void merge(const AttentionSplit& sp) const {
    float* out = out_of(units[sp.first_unit]);
    for (int64_t h = 0; h < group; ++h) {
      float* o = out + h * dim;
      float m = ml_of(sp.first_unit)[h], l = ml_of(sp.first_unit)[group + h];
      const float* first = partial_of(sp, sp.first_unit) + h * dim;
      std::copy(first, first + dim, o);
      for (int32_t c = 1; c < sp.n_units; ++c) {
        const float* mc = ml_of(sp.first_unit + c);
        fold_chunk(o, &m, &l, partial_of(sp, sp.first_unit + c) + h * dim, mc[h], mc[group + h],
                   dim);
      }
      const AttentionUnit& u = units[sp.first_unit];
      finish_row(o, u.token, u.kv_head * group + h, m, l);
    }
  }
};

}  // namespace

void merge_attention_parts(std::span<const float* const> acc, std::span<const float> m,
                           std::span<const float> l, int64_t dim, float* out) {
  KEEL_CHECK(acc.size() == m.size() && m.size() == l.size());
  bool any = false;
  float mx = 0.0f, sum = 0.0f;
  for (size_t p = 0; p < acc.size(); ++p) {
    if (l[p] == 0.0f) continue;
    if (!any) {
      std::copy(acc[p], acc[p] + dim, out);
      mx = m[p];
      sum = l[p];
      any = true;
      continue;
    }
    fold_chunk(out, &mx, &sum, acc[p], m[p], l[p], dim);
  }
  KEEL_CHECK_MSG(any, "merge_attention_parts: no part has positions");
  normalise(out, sum, dim);
}

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
  run.ml = grow(s.ml, n_units * 2 * kQueryTile * run.group);
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
  run.kernel_scratch = paged_attention_scratch_floats(run.group, run.dim);
  const int64_t per_thread = run.kernel_scratch + kQueryTile * run.group * (run.dim + 2);
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
