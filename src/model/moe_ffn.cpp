// MoeFfn: routing, per-expert buckets, grouped expert matmuls, and the weighted combine.
#include "model/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/check.h"
#include "core/index_cast.h"

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

void MoeFfn::forward_one(const MoeWeights& w, const float* xn, kernels::Ops& ops) {
  const auto ff = sz(p_.n_ff_exp), d = sz(d_);
  // Every chosen expert reads the same row: gate and up of two experts per matmul_many call (one
  // activation preparation, one pool job), then each expert's down projection.
  for (int64_t j = 0; j < k_; j += 2) {
    const int64_t m = std::min<int64_t>(2, k_ - j);
    kernels::Matrix ws[4];
    float* ys[4];
    for (int64_t i = 0; i < m; ++i) {
      const auto e = sz(sel_[sz(j + i)]);
      ws[2 * i] = w.gate[e];
      ws[2 * i + 1] = w.up[e];
      ys[2 * i] = gate_.data() + sz(j + i) * ff;
      ys[2 * i + 1] = up_.data() + sz(j + i) * ff;
    }
    ops.matmul_many({ws, sz(2 * m)}, xn, 1, {ys, sz(2 * m)});
  }
  for (int64_t j = 0; j < k_; ++j) {
    ops.silu_mul_matmul(w.down[sz(sel_[sz(j)])], gate_.data() + sz(j) * ff, up_.data() + sz(j) * ff,
                        1, ys_.data() + sz(j) * d);
  }
}

void MoeFfn::forward(const MoeWeights& w, const float* xn, int64_t n, kernels::Ops& ops,
                     float* out) {
  KEEL_CHECK(n >= 0 && n <= max_tokens_);
  if (n == 0) return;
  route(w, xn, n, ops);
  if (n == 1) {
    forward_one(w, xn, ops);
    combine(w, xn, n, ops, out);
    return;
  }
  // Bucket the (token, slot) pairs by expert: counting sort, stable in token order.
  std::fill(offsets_.begin(), offsets_.end(), 0);
  const int64_t slots = n * k_;
  for (int64_t s = 0; s < slots; ++s) ++offsets_[sz(sel_[sz(s)]) + 1];
  std::partial_sum(offsets_.begin(), offsets_.end(), offsets_.begin());
  fill_.assign(offsets_.begin(), offsets_.end() - 1);
  for (int64_t s = 0; s < slots; ++s) {
    order_[sz(fill_[sz(sel_[sz(s)])]++)] = static_cast<int32_t>(s);
  }
  const size_t d = sz(d_);
  for (int64_t e = 0; e < p_.n_expert; ++e) {
    const int32_t begin = offsets_[sz(e)], m = offsets_[sz(e) + 1] - begin;
    if (m == 0) continue;  // an expert no token chose: its weights are not read
    for (int32_t i = 0; i < m; ++i) {
      const auto t = sz(order_[sz(begin + i)] / k_);
      std::memcpy(xg_.data() + sz(i) * d, xn + t * d, d * sizeof(float));
    }
    run_expert(w, e, xg_.data(), m, ops, yg_.data());
    for (int32_t i = 0; i < m; ++i) {
      const auto slot = sz(order_[sz(begin + i)]);
      std::memcpy(ys_.data() + slot * d, yg_.data() + sz(i) * d, d * sizeof(float));
    }
  }
  combine(w, xn, n, ops, out);
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
