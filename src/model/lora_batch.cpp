// LoraBatch: grouping by adapter and the gathered low-rank matmuls (see lora_batch.h).
#include "model/lora_batch.h"
#include "core/index_cast.h"

#include <cstring>

namespace keel::model {
LoraBatch::LoraBatch() = default;
LoraBatch::~LoraBatch() = default;

bool LoraBatch::bind(const Batch& batch) {
  for (Group& g : groups_) g.tokens.clear();
  size_t used = 0;
  // A batch's sequences usually repeat few adapters: a linear search per sequence.
  std::vector<int32_t> group_of(batch.seqs.size(), -1);
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    const LoraAdapter* a = batch.seqs[s].lora;
    if (a == nullptr) continue;
    size_t g = 0;
    while (g < used && groups_[g].adapter != a) ++g;
    if (g == used) {
      if (used == groups_.size()) groups_.emplace_back();
      groups_[used++].adapter = a;
    }
    group_of[s] = static_cast<int32_t>(g);
  }
  groups_.resize(used);
  for (size_t t = 0; t < batch.size() && used > 0; ++t) {
    const int32_t g = group_of[sz(batch.seq_index[t])];
    if (g >= 0) groups_[sz(g)].tokens.push_back(static_cast<int32_t>(t));
  }
  num_rows_ = 0;
  for (Group& g : groups_) {
    g.first_row = num_rows_;
    num_rows_ += g.tokens.size();
  }
  return active();
}

void LoraBatch::gather(const float* src, int64_t cols, std::vector<float>* dst) const {
  const size_t c = sz(cols);
  if (dst->size() < num_rows_ * c) dst->resize(num_rows_ * c);
  for (const Group& g : groups_) {
    for (size_t i = 0; i < g.tokens.size(); ++i) {
      std::memcpy(dst->data() + (g.first_row + i) * c, src + sz(g.tokens[i]) * c,
                  c * sizeof(float));
    }
  }
}

bool LoraBatch::plan(int64_t il, std::span<const LoraTarget> targets) {
  items_.clear();
  for (size_t g = 0; g < groups_.size(); ++g) {
    const LoraLayer& layer = groups_[g].adapter->layers()[sz(il)];
    for (size_t i = 0; i < targets.size(); ++i) {
      if (layer[static_cast<size_t>(targets[i])]) items_.push_back({g, i});
    }
  }
  return !items_.empty();
}

void LoraBatch::run(int64_t il, std::span<const LoraTarget> targets, int64_t cols,
                    std::span<float* const> outs, kernels::Ops& ops) {
  ThreadPool& pool = ops.pool();
  if (workers_.size() < sz(pool.num_threads())) {
    workers_.resize(sz(pool.num_threads()));
    for (Worker& w : workers_) {
      if (w.ops) continue;
      w.pool = std::make_unique<ThreadPool>(1);
      w.ops = std::make_unique<kernels::Ops>(ops.isa(), w.pool.get());
    }
  }
  auto job = [&](int thread, int num_threads) {
    Worker& w = workers_[sz(thread)];
    for (size_t k = sz(thread); k < items_.size(); k += sz(num_threads)) {
      const Group& g = groups_[items_[k].group];
      const LoraPair& pair =
          *g.adapter->layers()[sz(il)][static_cast<size_t>(targets[items_[k].target])];
      const auto n = static_cast<int64_t>(g.tokens.size());
      const size_t rank = sz(pair.a.rows), out_cols = sz(pair.b.rows);
      if (w.low.size() < sz(n) * rank) w.low.resize(sz(n) * rank);
      if (w.delta.size() < sz(n) * out_cols) w.delta.resize(sz(n) * out_cols);
      w.ops->matmul(pair.a, in_.data() + g.first_row * sz(cols), n, w.low.data());
      // The scale goes on the rank-wide intermediate: rank multiplies per row, not out_cols.
      const float scale = g.adapter->effective_scale();
      for (size_t i = 0; i < sz(n) * rank; ++i) w.low[i] *= scale;
      w.ops->matmul(pair.b, w.low.data(), n, w.delta.data());
      float* out = outs[items_[k].target];
      for (size_t i = 0; i < g.tokens.size(); ++i) {
        w.ops->add(w.delta.data() + i * out_cols, pair.b.rows, out + sz(g.tokens[i]) * out_cols);
      }
    }
  };
  if (items_.size() == 1) {
    job(0, 1);  // one pair: no hand-off
  } else {
    pool.run(job);
  }
}

void LoraBatch::add_normed(int64_t il, std::span<const LoraTarget> targets, const float* x,
                           const float* norm_weight, float eps, int64_t cols,
                           std::span<float* const> outs, kernels::Ops& ops) {
  if (!plan(il, targets)) return;
  gather(x, cols, &in_);
  ops.rms_norm(in_.data(), norm_weight, static_cast<int64_t>(num_rows_), cols, eps, in_.data());
  run(il, targets, cols, outs, ops);
}

void LoraBatch::add(int64_t il, LoraTarget target, const float* in, int64_t cols, float* out,
                    kernels::Ops& ops) {
  if (!plan(il, {&target, 1})) return;
  gather(in, cols, &in_);
  run(il, {&target, 1}, cols, {&out, 1}, ops);
}

void LoraBatch::add_silu(int64_t il, const float* gate, const float* up, int64_t cols, float* out,
                         kernels::Ops& ops) {
  constexpr LoraTarget kDown = LoraTarget::kDown;
  if (!plan(il, {&kDown, 1})) return;
  gather(gate, cols, &in_);
  gather(up, cols, &in2_);
  ops.silu_mul(in_.data(), in2_.data(), static_cast<int64_t>(num_rows_) * cols, in_.data());
  run(il, {&kDown, 1}, cols, {&out, 1}, ops);
}

}  // namespace keel::model
