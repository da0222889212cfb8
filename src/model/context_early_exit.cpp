// Context::forward_early_exit: the layer stack with SpecEE's per-token early exit and the fill of
// skipped layers' K/V (see early_exit.h). Kept apart from context.cpp so the default forward()
// path carries no early-exit test in its loop.
#include <cstring>
#include <string>

#include "core/index_cast.h"
#include "model/context.h"

namespace keel::model {
Status Context::forward_early_exit(const Batch& batch, KvStorage& kv, kernels::Ops& ops,
                                   EarlyExit* ee, std::vector<float>* logits,
                                   std::vector<float>* hidden) {
  KEEL_TRY(validate_full(batch, kv));
  const size_t n = batch.size();
  if (!ee->may_exit.empty() && ee->may_exit.size() != n) {
    return Status::invalid_argument("early exit: may_exit has " +
                                    std::to_string(ee->may_exit.size()) + " entries, the batch " +
                                    std::to_string(n) + " tokens");
  }
  bind_tables(batch, kv.layout().block_size);
  embed(batch);
  const int64_t last = hp_.n_layer - 1;
  const size_t d = sz(hp_.n_embd);
  ee->exit_layer.assign(n, static_cast<int32_t>(last));
  ee->layers_run = 0;
  std::vector<uint8_t> frozen(n, 0);
  std::vector<float> saved(n * d);  // the frozen rows' residuals
  size_t num_frozen = 0;
  for (int64_t il = 0; il <= last; ++il) {
    if (num_frozen == n) {  // every token exited: fill the rest, projections only
      fill_kv(il, batch, kv, ops);
      continue;
    }
    attention_block(il, batch, kv, ops);
    ffn_block(il, static_cast<int64_t>(n), ops);
    ++ee->layers_run;
    for (size_t t = 0; t < n; ++t) {
      float* row = x_.data() + t * d;
      if (frozen[t]) {  // rode along: its residual stays h (the K/V it wrote are the fill)
        std::memcpy(row, saved.data() + t * d, d * sizeof(float));
        continue;
      }
      if (il == last || ee->may_exit.empty() || !ee->may_exit[t] || !ee->decide) continue;
      if (!ee->decide(il, t, std::span<const float>(row, d))) continue;
      frozen[t] = 1;
      ++num_frozen;
      ee->exit_layer[t] = static_cast<int32_t>(il);
      std::memcpy(saved.data() + t * d, row, d * sizeof(float));
    }
  }
  KEEL_TRY(take_moe_status());
  if (logits) output_logits(batch, ops, logits, hidden);
  return Status();
}

void Context::fill_kv(int64_t il, const Batch& batch, KvStorage& kv, kernels::Ops& ops) {
  const LayerWeights& w = model_.weights().layers[sz(il)];
  const auto n = static_cast<int64_t>(batch.size());
  const int64_t kv_dim = hp_.kv_dim();
  const kernels::Matrix kv_w[] = {w.wk, w.wv};
  float* const kv_out[] = {k_.data(), v_.data()};
  ops.rms_norm_matmul_many(kv_w, x_.data(), w.attn_norm.data(), hp_.rms_eps, n, kv_out);
  if (lora_.active()) {
    constexpr LoraTarget kKv[] = {LoraTarget::kK, LoraTarget::kV};
    lora_.add_normed(il, kKv, x_.data(), w.attn_norm.data(), hp_.rms_eps, hp_.n_embd, kv_out, ops);
  }
  for (int64_t t = 0; t < n; ++t) {
    if (!w.bk.empty()) ops.add(w.bk.data(), kv_dim, k_.data() + t * kv_dim);
    if (!w.bv.empty()) ops.add(w.bv.data(), kv_dim, v_.data() + t * kv_dim);
  }
  if (!w.k_norm.empty()) {
    ops.rms_norm(k_.data(), w.k_norm.data(), n * hp_.n_head_kv, hp_.head_dim, hp_.rms_eps,
                 k_.data());
  }
  ops.rope(hp_.rope, batch.positions.data(), n, hp_.n_head_kv, hp_.head_dim, kv_dim, k_.data());
  write_kv(il, batch, kv);
}

}  // namespace keel::model
