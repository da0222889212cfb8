// LoraBatch: grouping by adapter and the gathered low-rank matmuls (see lora_batch.h).
#include "model/lora_batch.h"

#include <cstring>

namespace keel::model {
namespace {

size_t sz(int64_t n) { return static_cast<size_t>(n); }

}  // namespace

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
  for (size_t t = 0; t < batch.size() && used > 0; ++t) {
    const int32_t g = group_of[sz(batch.seq_index[t])];
    if (g >= 0) groups_[sz(g)].tokens.push_back(static_cast<int32_t>(t));
  }
  groups_.resize(used);
  return active();
}

void LoraBatch::gather(const Group& g, const float* src, int64_t cols,
                       std::vector<float>* dst) const {
  const size_t c = sz(cols);
  if (dst->size() < g.tokens.size() * c) dst->resize(g.tokens.size() * c);
  for (size_t i = 0; i < g.tokens.size(); ++i) {
    std::memcpy(dst->data() + i * c, src + sz(g.tokens[i]) * c, c * sizeof(float));
  }
}

void LoraBatch::apply(const Group& g, int64_t il, LoraTarget target, float* out,
                      kernels::Ops& ops) {
  const std::optional<LoraPair>& pair = g.adapter->layers()[sz(il)][static_cast<size_t>(target)];
  if (!pair) return;
  const auto n = static_cast<int64_t>(g.tokens.size());
  const size_t rank = sz(pair->a.rows), out_cols = sz(pair->b.rows);
  if (low_.size() < sz(n) * rank) low_.resize(sz(n) * rank);
  if (delta_.size() < sz(n) * out_cols) delta_.resize(sz(n) * out_cols);
  ops.matmul(pair->a, in_.data(), n, low_.data());
  // The scale goes on the rank-wide intermediate: rank multiplies per row instead of out_cols.
  const float scale = g.adapter->effective_scale();
  for (size_t i = 0; i < sz(n) * rank; ++i) low_[i] *= scale;
  ops.matmul(pair->b, low_.data(), n, delta_.data());
  for (size_t i = 0; i < g.tokens.size(); ++i) {
    ops.add(delta_.data() + i * out_cols, pair->b.rows, out + sz(g.tokens[i]) * out_cols);
  }
}

bool LoraBatch::adapts(const Group& g, int64_t il, std::span<const LoraTarget> targets) {
  const LoraLayer& layer = g.adapter->layers()[sz(il)];
  for (LoraTarget t : targets) {
    if (layer[static_cast<size_t>(t)]) return true;
  }
  return false;
}

void LoraBatch::add_normed(int64_t il, std::span<const LoraTarget> targets, const float* x,
                           const float* norm_weight, float eps, int64_t cols,
                           std::span<float* const> outs, kernels::Ops& ops) {
  for (const Group& g : groups_) {
    if (!adapts(g, il, targets)) continue;
    gather(g, x, cols, &in_);
    ops.rms_norm(in_.data(), norm_weight, static_cast<int64_t>(g.tokens.size()), cols, eps,
                 in_.data());
    for (size_t i = 0; i < targets.size(); ++i) apply(g, il, targets[i], outs[i], ops);
  }
}

void LoraBatch::add(int64_t il, LoraTarget target, const float* in, int64_t cols, float* out,
                    kernels::Ops& ops) {
  for (const Group& g : groups_) {
    if (!adapts(g, il, {&target, 1})) continue;
    gather(g, in, cols, &in_);
    apply(g, il, target, out, ops);
  }
}

void LoraBatch::add_silu(int64_t il, const float* gate, const float* up, int64_t cols, float* out,
                         kernels::Ops& ops) {
  constexpr LoraTarget kDown[] = {LoraTarget::kDown};
  for (const Group& g : groups_) {
    if (!adapts(g, il, kDown)) continue;
    gather(g, gate, cols, &in_);
    gather(g, up, cols, &in2_);
    ops.silu_mul(in_.data(), in2_.data(), static_cast<int64_t>(g.tokens.size()) * cols, in_.data());
    apply(g, il, LoraTarget::kDown, out, ops);
  }
}

}  // namespace keel::model
