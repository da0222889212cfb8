// train_head (see trainer.h).
#include "predictor/trainer.h"

#include <cmath>
#include <string>

#include "core/index_cast.h"
#include "sampling/rng.h"

namespace keel::predictor {
namespace {

// Adam over one parameter vector.
struct Adam {
  std::vector<float> m, v;
  void step(std::vector<float>& w, const std::vector<float>& g, float lr, int32_t t) {
    constexpr float kB1 = 0.9f, kB2 = 0.999f, kEps = 1e-8f;
    if (m.empty()) {
      m.assign(w.size(), 0.0f);
      v.assign(w.size(), 0.0f);
    }
    const float c1 = 1.0f - std::pow(kB1, static_cast<float>(t));
    const float c2 = 1.0f - std::pow(kB2, static_cast<float>(t));
    for (size_t i = 0; i < w.size(); ++i) {
      m[i] = kB1 * m[i] + (1.0f - kB1) * g[i];
      v[i] = kB2 * v[i] + (1.0f - kB2) * g[i] * g[i];
      w[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + kEps);
    }
  }
};

// The training set's mean and 1/std per feature (std floored so constant features stay finite).
void fit_standardization(const std::vector<std::vector<float>>& x, LengthHead* head) {
  const size_t d = sz(head->input_dim);
  std::vector<double> mean(d, 0.0), var(d, 0.0);
  for (const auto& row : x) {
    for (size_t j = 0; j < d; ++j) mean[j] += row[j];
  }
  for (double& m : mean) m /= static_cast<double>(x.size());
  for (const auto& row : x) {
    for (size_t j = 0; j < d; ++j) var[j] += (row[j] - mean[j]) * (row[j] - mean[j]);
  }
  for (size_t j = 0; j < d; ++j) {
    head->feature_mean[j] = static_cast<float>(mean[j]);
    const double sd = std::sqrt(var[j] / static_cast<double>(x.size()));
    head->feature_scale[j] = static_cast<float>(1.0 / std::max(sd, 1e-6));
  }
}

struct Grads {
  std::vector<float> w1, b1, w2, b2;
};

// Mean cross-entropy + L2 over the standardised rows z; fills *g with its gradient.
double loss_and_grad(const LengthHead& h, const std::vector<std::vector<float>>& z,
                     const std::vector<int32_t>& labels, float wd, Grads* g) {
  const size_t d = sz(h.input_dim), nh = sz(h.hidden), k = sz(h.last_dim());
  const size_t nb = sz(h.num_buckets());
  g->w1.assign(h.w1.size(), 0.0f);
  g->b1.assign(h.b1.size(), 0.0f);
  g->w2.assign(h.w2.size(), 0.0f);
  g->b2.assign(h.b2.size(), 0.0f);
  const auto inv_n = static_cast<float>(1.0 / static_cast<double>(z.size()));
  std::vector<float> hid(nh), p(nb), dh(nh);
  double loss = 0;
  for (size_t i = 0; i < z.size(); ++i) {
    h.logits(z[i], hid, p);
    softmax_in_place(p);
    const auto y = static_cast<size_t>(labels[i]);
    loss -= std::log(std::max(p[y], 1e-30f));
    p[y] -= 1.0f;  // dloss/dlogits
    const float* last = nh > 0 ? hid.data() : z[i].data();
    std::fill(dh.begin(), dh.end(), 0.0f);
    for (size_t c = 0; c < nb; ++c) {
      const float e = p[c] * inv_n;
      g->b2[c] += e;
      float* gw = g->w2.data() + c * k;
      const float* w = h.w2.data() + c * k;
      for (size_t j = 0; j < k; ++j) gw[j] += e * last[j];
      for (size_t u = 0; u < nh; ++u) dh[u] += e * w[u];
    }
    for (size_t u = 0; u < nh; ++u) {
      if (hid[u] <= 0.0f) continue;
      g->b1[u] += dh[u];
      float* gw = g->w1.data() + u * d;
      for (size_t j = 0; j < d; ++j) gw[j] += dh[u] * z[i][j];
    }
  }
  double l2 = 0;
  for (size_t i = 0; i < h.w1.size(); ++i) {
    l2 += double{h.w1[i]} * h.w1[i];
    g->w1[i] += wd * h.w1[i];
  }
  for (size_t i = 0; i < h.w2.size(); ++i) {
    l2 += double{h.w2[i]} * h.w2[i];
    g->w2[i] += wd * h.w2[i];
  }
  return loss / static_cast<double>(z.size()) + 0.5 * wd * l2;
}

}  // namespace

Status TrainConfig::validate() const {
  if (hidden < 0 || hidden > 4096) return Status::invalid_argument("hidden units in [0, 4096]");
  if (steps < 0) return Status::invalid_argument("steps must be ≥ 0");
  if (!(learning_rate > 0.0f) || !(weight_decay >= 0.0f)) {
    return Status::invalid_argument("learning rate must be > 0 and weight decay ≥ 0");
  }
  return Status();
}

Result<TrainResult> train_head(const std::vector<std::vector<float>>& features,
                               const std::vector<int32_t>& labels, const LengthBuckets& buckets,
                               const TrainConfig& config) {
  KEEL_TRY(config.validate());
  KEEL_TRY(buckets.validate());
  if (features.empty() || features.size() != labels.size()) {
    return Status::invalid_argument("training needs as many labels as feature rows, at least one");
  }
  const auto d = static_cast<int64_t>(features[0].size());
  for (size_t i = 0; i < features.size(); ++i) {
    if (static_cast<int64_t>(features[i].size()) != d || d == 0) {
      return Status::invalid_argument("feature row " + std::to_string(i) + " has another size");
    }
    if (labels[i] < 0 || labels[i] >= buckets.num_buckets()) {
      return Status::invalid_argument("label " + std::to_string(labels[i]) + " is out of range");
    }
  }
  TrainResult r;
  r.head = LengthHead::zeros(buckets, d, config.hidden);
  LengthHead& h = r.head;
  fit_standardization(features, &h);
  sampling::Rng rng(config.seed);
  const float a = std::sqrt(6.0f / static_cast<float>(d));
  for (float& w : h.w1) w = a * static_cast<float>(2.0 * rng.next_double() - 1.0);
  std::vector<std::vector<float>> z(features.size(), std::vector<float>(sz(d)));
  for (size_t i = 0; i < features.size(); ++i) h.standardize(features[i], z[i]);

  Adam w1, b1, w2, b2;
  Grads g;
  for (int32_t t = 1; t <= config.steps; ++t) {
    r.loss.push_back(static_cast<float>(loss_and_grad(h, z, labels, config.weight_decay, &g)));
    if (config.hidden > 0) {
      w1.step(h.w1, g.w1, config.learning_rate, t);
      b1.step(h.b1, g.b1, config.learning_rate, t);
    }
    w2.step(h.w2, g.w2, config.learning_rate, t);
    b2.step(h.b2, g.b2, config.learning_rate, t);
  }
  r.loss.push_back(static_cast<float>(loss_and_grad(h, z, labels, config.weight_decay, &g)));
  KEEL_TRY(h.validate());
  return r;
}

}  // namespace keel::predictor
