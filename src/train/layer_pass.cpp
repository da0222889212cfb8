// layer_forward / layer_backward (layer_pass.h) and the LoRA projection they share.
#include "train/layer_pass.h"

#include <cmath>

#include "core/index_cast.h"
#include "train/causal_attention.h"

namespace keel::train {
namespace {

using model::LoraTarget;

// y = x·Wᵀ + bias + scale·(x·Aᵀ)·Bᵀ; keeps u = x·Aᵀ when the projection is adapted.
template <typename T>
void project(const LayerPassContext<T>& c, int64_t il, LoraTarget t, const DenseLayer<T>& w,
             const std::vector<float>& bias, const T* x, T* y, std::vector<T>* u) {
  const DenseMatrix<T>& m = w.w[static_cast<size_t>(t)];
  matmul(*c.pool, x, c.n, m, y, false, c.gate);
  if (!bias.empty()) {
    for (int64_t r = 0; r < c.n; ++r) {
      for (int64_t o = 0; o < m.rows; ++o) y[r * m.rows + o] += static_cast<T>(bias[sz(o)]);
    }
  }
  const LoraSlot* s = c.layout->find(il, t);
  if (s == nullptr) return;
  const int64_t rank = c.layout->rank;
  u->assign(sz(c.n * rank), T{0});
  matmul_raw(*c.pool, x, c.n, c.params + s->a_offset, rank, s->in, T{1}, u->data(), false);
  matmul_raw(*c.pool, u->data(), c.n, c.params + s->b_offset, s->out, rank,
             static_cast<T>(c.layout->scale()), y, true);
}

template <typename T>
std::vector<T> transposed(const T* m, int64_t rows, int64_t cols) {
  std::vector<T> out(sz(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; ++k) out[sz(k * rows + r)] = m[r * cols + k];
  }
  return out;
}

// Given dy of a projection, adds dx += dy·W (+ the LoRA path) and the A/B gradients.
template <typename T>
void project_backward(const LayerPassContext<T>& c, int64_t il, LoraTarget t,
                      const DenseLayer<T>& w, const T* x, const std::vector<T>& u, const T* dy,
                      T* dx) {
  matmul(*c.pool, dy, c.n, w.wt[static_cast<size_t>(t)], dx, true, c.gate);
  const LoraSlot* s = c.layout->find(il, t);
  if (s == nullptr) return;
  const int64_t rank = c.layout->rank;
  const T scale = static_cast<T>(c.layout->scale());
  // dB[o][k] += scale · Σ_t dy[t][o] · u[t][k]
  outer_sum(*c.pool, dy, c.n, s->out, u.data(), rank, scale, c.grads + s->b_offset);
  // du[t][k] = scale · Σ_o dy[t][o] · B[o][k]
  const std::vector<T> bt = transposed(c.params + s->b_offset, s->out, rank);
  std::vector<T> du(sz(c.n * rank));
  matmul_raw(*c.pool, dy, c.n, bt.data(), rank, s->out, scale, du.data(), false);
  // dA[k][i] += Σ_t du[t][k] · x[t][i];  dx += du · A
  outer_sum(*c.pool, du.data(), c.n, rank, x, s->in, T{1}, c.grads + s->a_offset);
  const std::vector<T> at = transposed(c.params + s->a_offset, rank, s->in);
  matmul_raw(*c.pool, du.data(), c.n, at.data(), s->in, rank, T{1}, dx, true);
}

template <typename T>
T sigmoid(T g) {
  return T{1} / (T{1} + std::exp(-g));
}

template <typename T>
void attention_half_forward(const LayerPassContext<T>& c, int64_t il, const DenseLayer<T>& w,
                            LayerActivations<T>* a) {
  const model::HParams& hp = c.model->hparams();
  const model::LayerWeights& lw = c.model->weights().layers[sz(il)];
  const int64_t n = c.n, d = hp.n_embd, q_dim = hp.q_dim(), kv_dim = hp.kv_dim();
  a->inv_rms1.resize(sz(n));
  a->h1.resize(sz(n * d));
  rms_norm_forward(a->x.data(), lw.attn_norm.data(), n, d, hp.rms_eps, a->h1.data(),
                   a->inv_rms1.data());
  a->q.resize(sz(n * q_dim));
  a->k.resize(sz(n * kv_dim));
  a->v.resize(sz(n * kv_dim));
  auto& u = a->lora_u;
  project(c, il, LoraTarget::kQ, w, lw.bq, a->h1.data(), a->q.data(), &u[0]);
  project(c, il, LoraTarget::kK, w, lw.bk, a->h1.data(), a->k.data(), &u[1]);
  project(c, il, LoraTarget::kV, w, lw.bv, a->h1.data(), a->v.data(), &u[2]);
  if (!lw.q_norm.empty()) {
    a->q_raw = a->q;
    a->k_raw = a->k;
    a->inv_q.resize(sz(n * hp.n_head));
    a->inv_k.resize(sz(n * hp.n_head_kv));
    rms_norm_forward(a->q_raw.data(), lw.q_norm.data(), n * hp.n_head, hp.head_dim, hp.rms_eps,
                     a->q.data(), a->inv_q.data());
    rms_norm_forward(a->k_raw.data(), lw.k_norm.data(), n * hp.n_head_kv, hp.head_dim, hp.rms_eps,
                     a->k.data(), a->inv_k.data());
  }
  rope_rotate(hp.rope, *c.rope, n, hp.n_head, hp.head_dim, q_dim, false, a->q.data());
  rope_rotate(hp.rope, *c.rope, n, hp.n_head_kv, hp.head_dim, kv_dim, false, a->k.data());
  const AttentionShape shape{n, hp.n_head, hp.n_head_kv, hp.head_dim};
  a->attn.resize(sz(n * q_dim));
  a->lse.resize(sz(n * hp.n_head));
  attention_forward(*c.pool, shape, a->q.data(), a->k.data(), a->v.data(), a->attn.data(),
                    a->lse.data());
  a->x1.resize(sz(n * d));
  project(c, il, LoraTarget::kO, w, lw.bo, a->attn.data(), a->x1.data(), &u[3]);
  for (size_t i = 0; i < a->x1.size(); ++i) a->x1[i] += a->x[i];
}

template <typename T>
void ffn_half_forward(const LayerPassContext<T>& c, int64_t il, const DenseLayer<T>& w,
                      LayerActivations<T>* a, T* x_out) {
  const model::HParams& hp = c.model->hparams();
  const model::LayerWeights& lw = c.model->weights().layers[sz(il)];
  const int64_t n = c.n, d = hp.n_embd, ff = hp.n_ff;
  const std::vector<float> none;
  a->inv_rms2.resize(sz(n));
  a->h2.resize(sz(n * d));
  rms_norm_forward(a->x1.data(), lw.ffn_norm.data(), n, d, hp.rms_eps, a->h2.data(),
                   a->inv_rms2.data());
  a->gate.resize(sz(n * ff));
  a->up.resize(sz(n * ff));
  a->act.resize(sz(n * ff));
  auto& u = a->lora_u;
  project(c, il, LoraTarget::kGate, w, none, a->h2.data(), a->gate.data(), &u[4]);
  project(c, il, LoraTarget::kUp, w, none, a->h2.data(), a->up.data(), &u[5]);
  for (size_t i = 0; i < a->act.size(); ++i) {
    a->act[i] = a->gate[i] * sigmoid(a->gate[i]) * a->up[i];
  }
  project(c, il, LoraTarget::kDown, w, none, a->act.data(), x_out, &u[6]);
  for (int64_t i = 0; i < n * d; ++i) x_out[i] += a->x1[sz(i)];
}

}  // namespace

template <typename T>
void layer_forward(const LayerPassContext<T>& c, int64_t il, const DenseLayer<T>& w, const T* x,
                   LayerActivations<T>* a, T* x_out) {
  a->x.assign(x, x + c.n * c.model->hparams().n_embd);
  attention_half_forward(c, il, w, a);
  ffn_half_forward(c, il, w, a, x_out);
}

template <typename T>
void layer_backward(const LayerPassContext<T>& c, int64_t il, const DenseLayer<T>& w,
                    const LayerActivations<T>& a, std::vector<T>* dx) {
  const model::HParams& hp = c.model->hparams();
  const model::LayerWeights& lw = c.model->weights().layers[sz(il)];
  const int64_t n = c.n, d = hp.n_embd, ff = hp.n_ff, q_dim = hp.q_dim(), kv_dim = hp.kv_dim();
  const auto& u = a.lora_u;
  // FFN: dx (= ∂/∂x_out) flows into x1 through the residual and through down·act.
  std::vector<T> dact(sz(n * ff), T{0});
  project_backward(c, il, LoraTarget::kDown, w, a.act.data(), u[6], dx->data(), dact.data());
  std::vector<T> dgate(dact.size()), dup(dact.size());
  for (size_t i = 0; i < dact.size(); ++i) {
    const T g = a.gate[i], sg = sigmoid(g);
    dup[i] = dact[i] * g * sg;
    dgate[i] = dact[i] * a.up[i] * sg * (T{1} + g * (T{1} - sg));
  }
  std::vector<T> dh(sz(n * d), T{0});
  project_backward(c, il, LoraTarget::kGate, w, a.h2.data(), u[4], dgate.data(), dh.data());
  project_backward(c, il, LoraTarget::kUp, w, a.h2.data(), u[5], dup.data(), dh.data());
  rms_norm_backward(a.x1.data(), lw.ffn_norm.data(), a.inv_rms2.data(), dh.data(), n, d,
                    dx->data());  // dx is now ∂/∂x1
  // Attention.
  std::vector<T> dattn(sz(n * q_dim), T{0});
  project_backward(c, il, LoraTarget::kO, w, a.attn.data(), u[3], dx->data(), dattn.data());
  std::vector<T> dq(sz(n * q_dim), T{0}), dk(sz(n * kv_dim), T{0}), dv(sz(n * kv_dim), T{0});
  const AttentionShape shape{n, hp.n_head, hp.n_head_kv, hp.head_dim};
  attention_backward(*c.pool, shape, a.q.data(), a.k.data(), a.v.data(), a.attn.data(),
                     a.lse.data(), dattn.data(), dq.data(), dk.data(), dv.data());
  rope_rotate(hp.rope, *c.rope, n, hp.n_head, hp.head_dim, q_dim, true, dq.data());
  rope_rotate(hp.rope, *c.rope, n, hp.n_head_kv, hp.head_dim, kv_dim, true, dk.data());
  if (!lw.q_norm.empty()) {
    std::vector<T> dq_raw(dq.size(), T{0}), dk_raw(dk.size(), T{0});
    rms_norm_backward(a.q_raw.data(), lw.q_norm.data(), a.inv_q.data(), dq.data(), n * hp.n_head,
                      hp.head_dim, dq_raw.data());
    rms_norm_backward(a.k_raw.data(), lw.k_norm.data(), a.inv_k.data(), dk.data(), n * hp.n_head_kv,
                      hp.head_dim, dk_raw.data());
    dq.swap(dq_raw);
    dk.swap(dk_raw);
  }
  std::fill(dh.begin(), dh.end(), T{0});
  project_backward(c, il, LoraTarget::kQ, w, a.h1.data(), u[0], dq.data(), dh.data());
  project_backward(c, il, LoraTarget::kK, w, a.h1.data(), u[1], dk.data(), dh.data());
  project_backward(c, il, LoraTarget::kV, w, a.h1.data(), u[2], dv.data(), dh.data());
  rms_norm_backward(a.x.data(), lw.attn_norm.data(), a.inv_rms1.data(), dh.data(), n, d,
                    dx->data());  // dx is now ∂/∂x
}

template void layer_forward<float>(const LayerPassContext<float>&, int64_t,
                                   const DenseLayer<float>&, const float*, LayerActivations<float>*,
                                   float*);
template void layer_forward<double>(const LayerPassContext<double>&, int64_t,
                                    const DenseLayer<double>&, const double*,
                                    LayerActivations<double>*, double*);
template void layer_backward<float>(const LayerPassContext<float>&, int64_t,
                                    const DenseLayer<float>&, const LayerActivations<float>&,
                                    std::vector<float>*);
template void layer_backward<double>(const LayerPassContext<double>&, int64_t,
                                     const DenseLayer<double>&, const LayerActivations<double>&,
                                     std::vector<double>*);

}  // namespace keel::train
