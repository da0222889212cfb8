// MoeFfn: routing, per-expert buckets, grouped expert matmuls, and the weighted combine.
#include "model/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/check.h"
#include "core/index_cast.h"
#include "model/expert_placement.h"

namespace keel::model {

void route_tokens(const MoeParams& p, const float* logits, int64_t n, int32_t* experts,
                  float* weights) {
  const auto ne = sz(p.n_expert), k = sz(p.n_expert_used);
  std::vector<float> prob(ne);
  std::vector<int32_t> idx(ne);
  for (int64_t t = 0; t < n; ++t) {
    const float* l = logits + sz(t) * ne;
    const float mx = *std::max_element(l, l + ne);
    double sum = 0.0;  // ggml's softmax sums in double
    for (size_t e = 0; e < ne; ++e) sum += (prob[e] = std::exp(l[e] - mx));
    const auto inv = static_cast<float>(1.0 / sum);
    for (size_t e = 0; e < ne; ++e) prob[e] *= inv;
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + static_cast<ptrdiff_t>(k), idx.end(),
                      [&](int32_t a, int32_t b) {
                        return prob[sz(a)] > prob[sz(b)] || (prob[sz(a)] == prob[sz(b)] && a < b);
                      });
    int32_t* sel = experts + sz(t) * k;
    float* w = weights + sz(t) * k;
    float wsum = 0.0f;
    for (size_t j = 0; j < k; ++j) {
      sel[j] = idx[j];
      wsum += (w[j] = prob[sz(idx[j])]);
    }
    if (p.norm_weights) {
      for (size_t j = 0; j < k; ++j) w[j] /= wsum;
    }
  }
}

MoeFfn::MoeFfn(const HParams& hp, int64_t max_tokens)
    : p_(hp.moe), d_(hp.n_embd), k_(hp.moe.n_expert_used), max_tokens_(max_tokens) {
  KEEL_CHECK(hp.is_moe() && max_tokens >= 1);
  const size_t t = sz(max_tokens);
  logits_.resize(t * sz(p_.n_expert));
  sel_.resize(t * sz(k_));
  wts_.resize(t * sz(k_));
  ys_.resize(t * sz(k_) * sz(d_));
  offsets_.resize(sz(p_.n_expert) + 1);
  fill_.reserve(sz(p_.n_expert));
  order_.resize(t * sz(k_));
  xg_.resize(t * sz(d_));
  yg_.resize(t * sz(d_));
  const int64_t ff = std::max(p_.n_ff_exp, p_.n_ff_shexp);
  // A decode step keeps the gate/up rows of all k experts at once (forward_one).
  gate_.resize(std::max(t, sz(k_)) * sz(ff));
  up_.resize(std::max(t, sz(k_)) * sz(ff));
  slot_row_.resize(t * sz(k_));
}

void MoeFfn::route(const MoeWeights& w, const float* xn, int64_t n, kernels::Ops& ops) {
  ops.matmul(w.router, xn, n, logits_.data());
  route_tokens(p_, logits_.data(), n, sel_.data(), wts_.data());
}

void MoeFfn::run_expert(const MoeWeights& w, int64_t e, const float* x, int64_t m,
                        kernels::Ops& ops, float* y) {
  const kernels::Matrix gate_up[] = {w.gate[sz(e)], w.up[sz(e)]};
  float* const gu_out[] = {gate_.data(), up_.data()};
  ops.matmul_many(gate_up, x, m, gu_out);
  ops.silu_mul_matmul(w.down[sz(e)], gate_.data(), up_.data(), m, y);
}

void MoeFfn::run_one_row(const MoeWeights& w, const float* x, int64_t n_slots,
                         const int32_t* slot_expert, kernels::Ops& ops, float* ys) {
  const auto ff = sz(p_.n_ff_exp), d = sz(d_);
  constexpr auto kMany = static_cast<int64_t>(kernels::Ops::kMaxMatmulMany);
  // Every slot reads the same row: gate and up of up to kMany / 2 experts per matmul_many call
  // (one activation preparation, one pool job), then the down projections of up to kMany experts
  // per silu_mul_matmul_many call (each over its own silu(gate)·up, one pool job) — two jobs for
  // k ≤ 8.
  kernels::Matrix ws[kMany];
  float* outs[kMany];
  for (int64_t j = 0; j < n_slots; j += kMany / 2) {
    const int64_t m = std::min(kMany / 2, n_slots - j);
    for (int64_t i = 0; i < m; ++i) {
      const auto e = sz(slot_expert[j + i]);
      ws[2 * i] = w.gate[e];
      ws[2 * i + 1] = w.up[e];
      outs[2 * i] = gate_.data() + sz(j + i) * ff;
      outs[2 * i + 1] = up_.data() + sz(j + i) * ff;
    }
    ops.matmul_many({ws, sz(2 * m)}, x, 1, {outs, sz(2 * m)});
  }
  const float* gates[kMany];
  const float* ups[kMany];
  for (int64_t j = 0; j < n_slots; j += kMany) {
    const int64_t m = std::min(kMany, n_slots - j);
    for (int64_t i = 0; i < m; ++i) {
      ws[i] = w.down[sz(slot_expert[j + i])];
      gates[i] = gate_.data() + sz(j + i) * ff;
      ups[i] = up_.data() + sz(j + i) * ff;
      outs[i] = ys + sz(j + i) * d;
    }
    ops.silu_mul_matmul_many({ws, sz(m)}, {gates, sz(m)}, {ups, sz(m)}, 1, {outs, sz(m)});
  }
}

void MoeFfn::run_grouped(const MoeWeights& w, const float* rows, int64_t n_slots,
                         const int32_t* slot_row, const int32_t* slot_expert, kernels::Ops& ops,
                         float* ys) {
  // Bucket the slots by expert: counting sort, stable in slot order.
  std::fill(offsets_.begin(), offsets_.end(), 0);
  for (int64_t s = 0; s < n_slots; ++s) ++offsets_[sz(slot_expert[s]) + 1];
  std::partial_sum(offsets_.begin(), offsets_.end(), offsets_.begin());
  fill_.assign(offsets_.begin(), offsets_.end() - 1);
  for (int64_t s = 0; s < n_slots; ++s) {
    order_[sz(fill_[sz(slot_expert[s])]++)] = static_cast<int32_t>(s);
  }
  const size_t d = sz(d_);
  for (int64_t e = 0; e < p_.n_expert; ++e) {
    const int32_t begin = offsets_[sz(e)], m = offsets_[sz(e) + 1] - begin;
    if (m == 0) continue;  // an expert no slot chose: its weights are not read
    KEEL_CHECK(m <= max_tokens_);
    for (int32_t i = 0; i < m; ++i) {
      const auto r = sz(slot_row[order_[sz(begin + i)]]);
      std::memcpy(xg_.data() + sz(i) * d, rows + r * d, d * sizeof(float));
    }
    run_expert(w, e, xg_.data(), m, ops, yg_.data());
    for (int32_t i = 0; i < m; ++i) {
      const auto slot = sz(order_[sz(begin + i)]);
      std::memcpy(ys + slot * d, yg_.data() + sz(i) * d, d * sizeof(float));
    }
  }
}

void MoeFfn::run_slots(const MoeWeights& w, const float* rows, int64_t n_slots,
                       const int32_t* slot_row, const int32_t* slot_expert, kernels::Ops& ops,
                       float* ys) {
  KEEL_CHECK(n_slots >= 0 && n_slots <= max_tokens_ * k_);
  if (n_slots == 0) return;
  const bool one_row = n_slots <= k_ && std::all_of(slot_row, slot_row + n_slots,
                                                    [&](int32_t r) { return r == slot_row[0]; });
  if (one_row) {
    run_one_row(w, rows + sz(slot_row[0]) * sz(d_), n_slots, slot_expert, ops, ys);
  } else {
    run_grouped(w, rows, n_slots, slot_row, slot_expert, ops, ys);
  }
}

void MoeFfn::forward(const MoeWeights& w, int64_t layer, const float* xn, int64_t n,
                     kernels::Ops& ops, float* out) {
  begin(w, layer, xn, n, ops);
  finish(w, xn, n, ops, out);
}

void MoeFfn::begin(const MoeWeights& w, int64_t layer, const float* xn, int64_t n,
                   kernels::Ops& ops) {
  KEEL_CHECK(n >= 0 && n <= max_tokens_ && begun_ < 0);
  begun_ = n;
  if (n == 0) return;
  route(w, xn, n, ops);
  const int64_t slots = n * k_;
  for (int64_t s = 0; s < slots; ++s) slot_row_[sz(s)] = static_cast<int32_t>(s / k_);
  if (ep_.remote == nullptr) {
    run_slots(w, xn, slots, slot_row_.data(), sel_.data(), ops, ys_.data());
  } else {
    start_expert_parallel(w, layer, xn, n, ops);
  }
}

void MoeFfn::finish(const MoeWeights& w, const float* xn, int64_t n, kernels::Ops& ops,
                    float* out) {
  KEEL_CHECK(begun_ == n);
  begun_ = -1;
  if (n == 0) return;
  collect_remote();
  combine(w, xn, n, ops, out);
}

namespace {

// ys[slot[i]] = part[i] for the n slots of one part.
void scatter(const float* part, const std::vector<int32_t>& slot, size_t d, float* ys) {
  for (size_t i = 0; i < slot.size(); ++i) {
    std::memcpy(ys + sz(slot[i]) * d, part + i * d, d * sizeof(float));
  }
}

}  // namespace

void MoeFfn::start_expert_parallel(const MoeWeights& w, int64_t layer, const float* xn, int64_t n,
                                   kernels::Ops& ops) {
  for (auto* v : {&loc_row_, &loc_expert_, &loc_slot_, &rem_row_, &rem_expert_, &rem_slot_}) {
    v->clear();
  }
  rem_shard_.clear();
  const int64_t n_slots = n * k_;
  if (ep_.placement != nullptr) {  // replicated experts: the leader picks each slot's copy
    slot_shard_.resize(sz(n_slots));
    shard_load_.resize(sz(ep_.placement->shards()));
    assign_slots(*ep_.placement, layer, {sel_.data(), sz(n_slots)}, slot_shard_, shard_load_,
                 pending_);
  }
  for (int64_t s = 0; s < n_slots; ++s) {
    const int32_t e = sel_[sz(s)];
    const bool here =
        ep_.placement != nullptr ? slot_shard_[sz(s)] == local_.index : local_.owns(e, p_.n_expert);
    (here ? loc_row_ : rem_row_).push_back(slot_row_[sz(s)]);
    (here ? loc_expert_ : rem_expert_).push_back(e);
    (here ? loc_slot_ : rem_slot_).push_back(static_cast<int32_t>(s));
    if (!here && ep_.placement != nullptr) rem_shard_.push_back(slot_shard_[sz(s)]);
  }
  if (ep_.local_slots != nullptr) {
    ep_.local_slots->fetch_add(static_cast<int64_t>(loc_slot_.size()), std::memory_order_relaxed);
  }
  const size_t d = sz(d_);
  if (ypart_.size() < ys_.size()) ypart_.resize(ys_.size());
  in_flight_ = false;
  if (!rem_slot_.empty() && status_.ok()) {
    const ExpertWork work{layer,
                          n,
                          xn,
                          static_cast<int64_t>(rem_slot_.size()),
                          rem_row_.data(),
                          rem_expert_.data(),
                          ep_.placement != nullptr ? rem_shard_.data() : nullptr};
    status_ = ep_.remote->dispatch(work);
    in_flight_ = status_.ok();
  }
  if (!ep_.overlap) collect_remote();
  run_slots(w, xn, static_cast<int64_t>(loc_slot_.size()), loc_row_.data(), loc_expert_.data(), ops,
            ypart_.data());
  scatter(ypart_.data(), loc_slot_, d, ys_.data());
}

void MoeFfn::collect_remote() {
  if (ep_.remote == nullptr) return;
  const size_t d = sz(d_);
  if (in_flight_) {
    in_flight_ = false;
    status_ = ep_.remote->collect(ypart_.data());
    if (status_.ok()) scatter(ypart_.data(), rem_slot_, d, ys_.data());
  }
  if (!status_.ok()) {  // the remote slots' outputs are zero; the caller fails the step
    for (const int32_t s : rem_slot_) std::fill_n(ys_.data() + sz(s) * d, d, 0.0f);
  }
}

void MoeFfn::forward_naive(const MoeWeights& w, const float* xn, int64_t n, kernels::Ops& ops,
                           float* out) {
  KEEL_CHECK(n >= 0 && n <= max_tokens_);
  const size_t d = sz(d_);
  for (int64_t t = 0; t < n; ++t) {
    const float* x = xn + sz(t) * d;
    ops.matmul(w.router, x, 1, logits_.data() + sz(t) * sz(p_.n_expert));
  }
  route_tokens(p_, logits_.data(), n, sel_.data(), wts_.data());
  for (int64_t s = 0; s < n * k_; ++s) {
    run_expert(w, sel_[sz(s)], xn + sz(s / k_) * d, 1, ops, ys_.data() + sz(s) * d);
  }
  combine(w, xn, n, ops, out);
}

void MoeFfn::combine(const MoeWeights& w, const float* xn, int64_t n, kernels::Ops& ops,
                     float* out) {
  const size_t d = sz(d_);
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + sz(t) * d;
    for (int64_t j = 0; j < k_; ++j) {
      const float wj = wts_[sz(t * k_ + j)];
      const float* y = ys_.data() + sz(t * k_ + j) * d;
      if (j == 0) {
        for (size_t i = 0; i < d; ++i) o[i] = y[i] * wj;
      } else {
        for (size_t i = 0; i < d; ++i) o[i] += y[i] * wj;
      }
    }
  }
  if (!w.has_shared()) return;
  // qwen2moe: + sigmoid(shared_router · x) · SwiGLU_shared(x), for all rows in one pass.
  const kernels::Matrix gate_up[] = {w.shared_gate, w.shared_up};
  float* const gu_out[] = {gate_.data(), up_.data()};
  ops.matmul_many(gate_up, xn, n, gu_out);
  ops.silu_mul_matmul(w.shared_down, gate_.data(), up_.data(), n, yg_.data());
  for (int64_t t = 0; t < n; ++t) {
    const float* x = xn + sz(t) * d;
    float g = 0.0f;
    for (size_t i = 0; i < d; ++i) g += w.shared_router[i] * x[i];
    const float s = 1.0f / (1.0f + std::exp(-g));
    const float* y = yg_.data() + sz(t) * d;
    float* o = out + sz(t) * d;
    for (size_t i = 0; i < d; ++i) o[i] += y[i] * s;
  }
}

}  // namespace keel::model
