// train_draft_head and its forward/backward pass over one pair (see draft_trainer.h).
#include "draft/draft_trainer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "core/index_cast.h"
#include "kernels/weight_layout.h"
#include "sampling/rng.h"

namespace keel::draft {
namespace {

// The parameter tensors of a weights (or gradient, or Adam moment) struct, in a fixed order.
std::array<std::vector<float>*, 7> tensors(DraftHeadWeights& w) {
  return {&w.w_in, &w.b_in, &w.w_up, &w.b_up, &w.w_down, &w.b_down, &w.norm};
}

// A struct of zeros shaped like `w`.
DraftHeadWeights zeros_like(const DraftHeadWeights& w) {
  DraftHeadWeights z = w;
  for (std::vector<float>* t : tensors(z)) std::fill(t->begin(), t->end(), 0.0f);
  return z;
}

// y = W·x, W [rows][cols].
void matvec(const float* w, int64_t rows, int64_t cols, const float* x, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w + r * cols;
    float s = 0;
    for (int64_t c = 0; c < cols; ++c) s += row[c] * x[c];
    y[r] = s;
  }
}
// out += Wᵀ·g.
void matvec_t_acc(const float* w, int64_t rows, int64_t cols, const float* g, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w + r * cols;
    const float gr = g[r];
    for (int64_t c = 0; c < cols; ++c) out[c] += gr * row[c];
  }
}
// dW += g ⊗ x.
void outer_acc(float* dw, int64_t rows, int64_t cols, const float* g, const float* x) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = dw + r * cols;
    const float gr = g[r];
    for (int64_t c = 0; c < cols; ++c) row[c] += gr * x[c];
  }
}

float sigmoid(float a) { return 1.0f / (1.0f + std::exp(-a)); }

// What the pass needs of the target: its LM head as floats.
struct Frozen {
  const model::Model* model = nullptr;
  int64_t d = 0, vocab = 0;
  std::vector<float> w_out;  // [vocab][d]
};

Frozen freeze(const model::Model& m) {
  Frozen f;
  f.model = &m;
  f.d = m.hparams().n_embd;
  f.vocab = m.hparams().n_vocab;
  f.w_out.resize(sz(f.vocab * f.d));
  for (int64_t r = 0; r < f.vocab; ++r) {
    kernels::dequantize_matrix_row(m.weights().output, r, f.w_out.data() + r * f.d);
  }
  return f;
}

struct Activations {
  std::vector<float> x, z, a, u, h, n, f, logits;
  float r = 1;
};

// Forward over one pair; returns (cross-entropy, feature term) and whether the argmax is right.
struct PairLoss {
  double ce = 0, feat = 0;
  bool correct = false;
};

PairLoss forward(const DraftHeadWeights& w, const Frozen& fz, const DraftDataset& data,
                 const DraftPair& p, float feature_weight, Activations* act) {
  const int64_t d = w.n_embd, hid = w.hidden;
  act->x.resize(sz(2 * d));
  std::copy_n(data.features.begin() + p.row * d, d, act->x.begin());
  kernels::dequantize_matrix_row(fz.model->weights().token_embd, p.token, act->x.data() + d);
  act->z.resize(sz(d));
  matvec(w.w_in.data(), d, 2 * d, act->x.data(), act->z.data());
  for (int64_t i = 0; i < d; ++i) act->z[sz(i)] += w.b_in[sz(i)];
  act->a.resize(sz(hid));
  act->u.resize(sz(hid));
  matvec(w.w_up.data(), hid, d, act->z.data(), act->a.data());
  for (int64_t j = 0; j < hid; ++j) {
    act->a[sz(j)] += w.b_up[sz(j)];
    act->u[sz(j)] = act->a[sz(j)] * sigmoid(act->a[sz(j)]);
  }
  act->h.resize(sz(d));
  matvec(w.w_down.data(), d, hid, act->u.data(), act->h.data());
  double ss = 0;
  for (int64_t i = 0; i < d; ++i) {
    act->h[sz(i)] += w.b_down[sz(i)] + act->z[sz(i)];
    ss += static_cast<double>(act->h[sz(i)]) * act->h[sz(i)];
  }
  act->r = static_cast<float>(std::sqrt(ss / static_cast<double>(d) + w.rms_eps));
  act->n.resize(sz(d));
  act->f.resize(sz(d));
  PairLoss out;
  const float* target = data.features.data() + (p.row + 1) * d;
  for (int64_t i = 0; i < d; ++i) {
    act->n[sz(i)] = act->h[sz(i)] / act->r;
    act->f[sz(i)] = w.norm[sz(i)] * act->n[sz(i)];
    const double e = act->f[sz(i)] - target[i];
    out.feat += feature_weight * e * e / static_cast<double>(d);
  }
  act->logits.resize(sz(fz.vocab));
  matvec(fz.w_out.data(), fz.vocab, d, act->f.data(), act->logits.data());
  const auto best = std::max_element(act->logits.begin(), act->logits.end());
  out.correct = best - act->logits.begin() == p.label;
  const float top = *best;  // read once: the loop below overwrites the logits
  double total = 0;
  for (float& l : act->logits) {
    l = std::exp(l - top);  // logits now hold unnormalised probabilities
    total += l;
  }
  for (float& l : act->logits) l = static_cast<float>(l / total);
  out.ce = -std::log(std::max(static_cast<double>(act->logits[sz(p.label)]), 1e-30));
  return out;
}

// Accumulates the pair's gradient (act from forward(): logits hold the probabilities) into *g.
void backward(const DraftHeadWeights& w, const Frozen& fz, const DraftDataset& data,
              const DraftPair& p, float feature_weight, Activations& act, DraftHeadWeights* g,
              std::vector<float>* scratch) {
  const int64_t d = w.n_embd, hid = w.hidden;
  act.logits[sz(p.label)] -= 1.0f;  // dlogits = p − onehot(label)
  std::vector<float>& df = *scratch;
  df.assign(sz(d), 0.0f);
  matvec_t_acc(fz.w_out.data(), fz.vocab, d, act.logits.data(), df.data());
  const float* target = data.features.data() + (p.row + 1) * d;
  double dot = 0;
  std::vector<float> dh(sz(d)), du(sz(hid), 0.0f), dz(sz(d));
  for (int64_t i = 0; i < d; ++i) {
    df[sz(i)] += feature_weight * 2.0f * (act.f[sz(i)] - target[i]) / static_cast<float>(d);
    g->norm[sz(i)] += df[sz(i)] * act.n[sz(i)];
    dh[sz(i)] = df[sz(i)] * w.norm[sz(i)];  // dn
    dot += static_cast<double>(dh[sz(i)]) * act.n[sz(i)];
  }
  const auto mean = static_cast<float>(dot / static_cast<double>(d));
  for (int64_t i = 0; i < d; ++i) dh[sz(i)] = (dh[sz(i)] - act.n[sz(i)] * mean) / act.r;
  for (int64_t i = 0; i < d; ++i) g->b_down[sz(i)] += dh[sz(i)];
  outer_acc(g->w_down.data(), d, hid, dh.data(), act.u.data());
  matvec_t_acc(w.w_down.data(), d, hid, dh.data(), du.data());
  for (int64_t j = 0; j < hid; ++j) {
    const float s = sigmoid(act.a[sz(j)]);
    du[sz(j)] *= s * (1.0f + act.a[sz(j)] * (1.0f - s));  // da
    g->b_up[sz(j)] += du[sz(j)];
  }
  outer_acc(g->w_up.data(), hid, d, du.data(), act.z.data());
  std::copy(dh.begin(), dh.end(), dz.begin());  // the residual path
  matvec_t_acc(w.w_up.data(), hid, d, du.data(), dz.data());
  for (int64_t i = 0; i < d; ++i) g->b_in[sz(i)] += dz[sz(i)];
  outer_acc(g->w_in.data(), d, 2 * d, dz.data(), act.x.data());
}

// One Adam update of w from the mean gradient g (t: the 1-based step).
void adam_step(DraftHeadWeights* w, const DraftHeadWeights& g, DraftHeadWeights* m,
               DraftHeadWeights* v, float lr, int64_t t, float inv_batch) {
  constexpr float kB1 = 0.9f, kB2 = 0.999f, kEps = 1e-8f;
  const float c1 = 1.0f - std::pow(kB1, static_cast<float>(t));
  const float c2 = 1.0f - std::pow(kB2, static_cast<float>(t));
  const auto wt = tensors(*w), mt = tensors(*m), vt = tensors(*v);
  const auto gt = tensors(const_cast<DraftHeadWeights&>(g));
  for (size_t k = 0; k < wt.size(); ++k) {
    for (size_t i = 0; i < wt[k]->size(); ++i) {
      const float gi = (*gt[k])[i] * inv_batch;
      float& mi = (*mt[k])[i];
      float& vi = (*vt[k])[i];
      mi = kB1 * mi + (1 - kB1) * gi;
      vi = kB2 * vi + (1 - kB2) * gi * gi;
      (*wt[k])[i] -= lr * (mi / c1) / (std::sqrt(vi / c2) + kEps);
    }
  }
}

float uniform(sampling::Rng& rng, float bound) {
  return static_cast<float>((2.0 * rng.next_double() - 1.0) * bound);
}

}  // namespace

Status DraftTrainConfig::validate() const {
  if (hidden < 1 || hidden > kMaxDraftHidden) {
    return Status::invalid_argument("--hidden must be in [1, " + std::to_string(kMaxDraftHidden) +
                                    "]");
  }
  if (epochs < 1) return Status::invalid_argument("--epochs must be at least 1");
  if (max_steps < 0) return Status::invalid_argument("max steps must be ≥ 0");
  if (batch < 1) return Status::invalid_argument("batch must be at least 1");
  if (!(learning_rate > 0.0f) || !(feature_weight >= 0.0f)) {
    return Status::invalid_argument("learning rate must be > 0 and feature weight ≥ 0");
  }
  return Status();
}

DraftHeadWeights init_draft_head(const model::Model& target, const DraftTrainConfig& config) {
  const int64_t d = target.hparams().n_embd, hid = config.hidden;
  DraftHeadWeights w;
  w.n_embd = d;
  w.hidden = hid;
  w.rms_eps = target.hparams().rms_eps;
  sampling::Rng rng(config.seed);
  const float in_bound = 0.5f / std::sqrt(static_cast<float>(d));
  w.w_in.resize(sz(d * 2 * d));
  for (int64_t r = 0; r < d; ++r) {
    for (int64_t c = 0; c < 2 * d; ++c) {
      w.w_in[sz(r * 2 * d + c)] = (c == r ? 1.0f : 0.0f) + uniform(rng, in_bound);
    }
  }
  w.b_in.assign(sz(d), 0.0f);
  w.w_up.resize(sz(hid * d));
  for (float& x : w.w_up) x = uniform(rng, 1.0f / std::sqrt(static_cast<float>(d)));
  w.b_up.assign(sz(hid), 0.0f);
  w.w_down.resize(sz(d * hid));
  for (float& x : w.w_down) x = uniform(rng, 0.5f / std::sqrt(static_cast<float>(hid)));
  w.b_down.assign(sz(d), 0.0f);
  w.norm = target.weights().output_norm;
  return w;
}

DraftLoss evaluate_draft_head(const DraftHeadWeights& weights, const DraftDataset& data,
                              const model::Model& target, float feature_weight) {
  const Frozen fz = freeze(target);
  Activations act;
  DraftLoss out;
  for (const DraftPair& p : data.pairs) {
    const PairLoss l = forward(weights, fz, data, p, feature_weight, &act);
    out.cross_entropy += l.ce;
    out.loss += l.ce + l.feat;
    out.accuracy += l.correct ? 1 : 0;
  }
  const auto n = static_cast<double>(std::max<size_t>(data.pairs.size(), 1));
  out.loss /= n;
  out.cross_entropy /= n;
  out.accuracy /= n;
  return out;
}

Result<DraftTrainResult> train_draft_head(const DraftDataset& data, const model::Model& target,
                                          const DraftTrainConfig& config,
                                          const DraftTrainProgress& progress) {
  KEEL_TRY(config.validate());
  if (data.pairs.empty()) return Status::invalid_argument("no training pairs");
  if (data.n_embd != target.hparams().n_embd) {
    return Status::invalid_argument("the dataset's features are " + std::to_string(data.n_embd) +
                                    " wide, the model's " +
                                    std::to_string(target.hparams().n_embd));
  }
  const Frozen fz = freeze(target);
  DraftTrainResult out;
  out.weights = init_draft_head(target, config);
  out.before = evaluate_draft_head(out.weights, data, target, config.feature_weight);
  DraftHeadWeights grad = zeros_like(out.weights), m = grad, v = grad;
  std::vector<size_t> order(data.pairs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  sampling::Rng shuffle(config.seed ^ 0x5DEECE66Dull);
  Activations act;
  std::vector<float> scratch;
  for (int32_t epoch = 0; epoch < config.epochs; ++epoch) {
    for (size_t i = order.size(); i > 1; --i) {  // Fisher–Yates
      std::swap(order[i - 1], order[shuffle.next_u64() % i]);
    }
    DraftLoss seen;
    size_t n_seen = 0;
    for (size_t start = 0; start < order.size(); start += sz(config.batch)) {
      if (config.max_steps > 0 && out.steps >= config.max_steps) break;
      const size_t end = std::min(order.size(), start + sz(config.batch));
      for (std::vector<float>* t : tensors(grad)) std::fill(t->begin(), t->end(), 0.0f);
      for (size_t i = start; i < end; ++i) {
        const DraftPair& p = data.pairs[order[i]];
        const PairLoss l = forward(out.weights, fz, data, p, config.feature_weight, &act);
        seen.loss += l.ce + l.feat;
        seen.cross_entropy += l.ce;
        seen.accuracy += l.correct ? 1 : 0;
        ++n_seen;
        backward(out.weights, fz, data, p, config.feature_weight, act, &grad, &scratch);
      }
      ++out.steps;
      adam_step(&out.weights, grad, &m, &v, config.learning_rate, out.steps,
                1.0f / static_cast<float>(end - start));
    }
    if (n_seen == 0) break;
    // The running mean over the epoch's batches (each before its own update).
    seen.loss /= static_cast<double>(n_seen);
    seen.cross_entropy /= static_cast<double>(n_seen);
    seen.accuracy /= static_cast<double>(n_seen);
    out.epochs.push_back(seen);
    if (progress) progress(epoch, seen);
  }
  if (Status s = out.weights.validate(); !s.ok()) {
    return Status::internal("training diverged: " + s.message());
  }
  return out;
}

}  // namespace keel::draft
