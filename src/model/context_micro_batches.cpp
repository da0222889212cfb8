// Context's micro-batch ping-pong for expert-parallel MoE layers (see context.h): two halves of the
// batch alternate, so that the leader computes one half's attention while the other half's remote
// experts run in their members.
#include "core/check.h"
#include "core/index_cast.h"
#include "model/context.h"

namespace keel::model {

bool Context::ping_pong_applies(const Batch& batch) const {
  return moe_ != nullptr && ep_.remote != nullptr && ep_.overlap && ep_.ping_pong &&
         batch.size() >= 2 && !lora_.active() && batch.selector == nullptr;
}

void Context::moe_begin(int64_t il, Rows rows, kernels::Ops& ops) {
  const LayerWeights& w = model_.weights().layers[sz(il)];
  const int64_t d = hp_.n_embd;
  float* const xn = moe_in_.data() + rows.first * d;
  ops.rms_norm(x_.data() + rows.first * d, w.ffn_norm.data(), rows.n, d, hp_.rms_eps, xn);
  moe_->begin(w.moe, il, xn, rows.n, ops);
}

void Context::moe_finish(int64_t il, Rows rows, kernels::Ops& ops) {
  const LayerWeights& w = model_.weights().layers[sz(il)];
  const int64_t d = hp_.n_embd;
  float* const out = moe_out_.data() + rows.first * d;
  moe_->finish(w.moe, moe_in_.data() + rows.first * d, rows.n, ops, out);
  if (expert_counts_ != nullptr) expert_counts_->add(il, moe_->experts(rows.n));
  ops.add(out, rows.n * d, x_.data() + rows.first * d);
}

Status Context::run_layers_ping_pong(const Batch& batch, KvStorage& kv, kernels::Ops& ops) {
  const auto n = static_cast<int64_t>(batch.size());
  KEEL_CHECK(n >= 2);
  const Rows a{0, n / 2}, b{n / 2, n - n / 2};
  if (ep_.ping_pong_passes != nullptr) {
    ep_.ping_pong_passes->fetch_add(1, std::memory_order_relaxed);
  }
  attention_block(first_, batch, kv, ops, a);
  for (int64_t il = first_; il < last_; ++il) {
    moe_begin(il, a, ops);
    attention_block(il, batch, kv, ops, b);
    moe_finish(il, a, ops);
    moe_begin(il, b, ops);
    if (il + 1 < last_) attention_block(il + 1, batch, kv, ops, a);
    moe_finish(il, b, ops);
  }
  return take_moe_status();
}

}  // namespace keel::model
