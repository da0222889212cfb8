// train_exit_predictors, exit_loss, calibrate_exits and random_exit_predictors (see
// exit_trainer.h).
#include "draft/exit_trainer.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/index_cast.h"
#include "sampling/rng.h"

namespace keel::draft {
namespace {

double bce(float p, uint8_t label) {
  const double q = std::clamp(static_cast<double>(p), 1e-7, 1.0 - 1e-7);
  return label ? -std::log(q) : -std::log(1.0 - q);
}

// One layer's MLP as a flat parameter vector: w1 [H][12], b1 [H], w2 [H], b2.
struct Flat {
  int64_t h;
  size_t w1() const { return 0; }
  size_t b1() const { return sz(h * kExitFeatures); }
  size_t w2() const { return b1() + sz(h); }
  size_t b2() const { return w2() + sz(h); }
  size_t size() const { return b2() + 1; }
};

void unflatten(const std::vector<float>& v, const Flat& f, LayerExitPredictor* p) {
  p->w1.assign(v.begin(), v.begin() + static_cast<ptrdiff_t>(f.b1()));
  p->b1.assign(v.begin() + static_cast<ptrdiff_t>(f.b1()),
               v.begin() + static_cast<ptrdiff_t>(f.w2()));
  p->w2.assign(v.begin() + static_cast<ptrdiff_t>(f.w2()),
               v.begin() + static_cast<ptrdiff_t>(f.b2()));
  p->b2 = v[f.b2()];
}

// Adds the gradient of BCE(sample) to *g; returns P.
float accumulate(const std::vector<float>& v, const Flat& f, const ExitSample& s,
                 std::vector<float>* act, std::vector<float>* g) {
  const int64_t h = f.h;
  float out = v[f.b2()];
  for (int64_t j = 0; j < h; ++j) {
    const float* w = v.data() + f.w1() + sz(j * kExitFeatures);
    float a = v[f.b1() + sz(j)];
    for (int32_t i = 0; i < kExitFeatures; ++i) a += w[i] * s.features[sz(i)];
    (*act)[sz(j)] = a > 0.0f ? a : 0.0f;
    out += v[f.w2() + sz(j)] * (*act)[sz(j)];
  }
  const float p = 1.0f / (1.0f + std::exp(-out));
  const float d = p - static_cast<float>(s.label);
  (*g)[f.b2()] += d;
  for (int64_t j = 0; j < h; ++j) {
    const float a = (*act)[sz(j)];
    if (a <= 0.0f) continue;
    (*g)[f.w2() + sz(j)] += d * a;
    const float dj = d * v[f.w2() + sz(j)];
    (*g)[f.b1() + sz(j)] += dj;
    float* gw = g->data() + f.w1() + sz(j * kExitFeatures);
    for (int32_t i = 0; i < kExitFeatures; ++i) gw[i] += dj * s.features[sz(i)];
  }
  return p;
}

struct Adam {
  std::vector<float> m, v;
  int64_t t = 0;
  void step(std::vector<float>* w, const std::vector<float>& g, float lr, float scale) {
    constexpr float kB1 = 0.9f, kB2 = 0.999f, kEps = 1e-8f;
    ++t;
    const float c1 = 1.0f - std::pow(kB1, static_cast<float>(t));
    const float c2 = 1.0f - std::pow(kB2, static_cast<float>(t));
    for (size_t i = 0; i < w->size(); ++i) {
      const float gi = g[i] * scale;
      m[i] = kB1 * m[i] + (1.0f - kB1) * gi;
      v[i] = kB2 * v[i] + (1.0f - kB2) * gi * gi;
      (*w)[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + kEps);
    }
  }
};

std::vector<float> init_layer(const Flat& f, sampling::Rng& rng) {
  std::vector<float> v(f.size(), 0.0f);
  const float a1 = 1.0f / std::sqrt(static_cast<float>(kExitFeatures));
  const float a2 = 1.0f / std::sqrt(static_cast<float>(f.h));
  for (size_t i = f.w1(); i < f.b1(); ++i)
    v[i] = a1 * static_cast<float>(2 * rng.next_double() - 1);
  for (size_t i = f.w2(); i < f.b2(); ++i)
    v[i] = a2 * static_cast<float>(2 * rng.next_double() - 1);
  return v;
}

void shuffle(std::vector<size_t>* idx, sampling::Rng& rng) {
  for (size_t i = idx->size(); i > 1; --i) {
    std::swap((*idx)[i - 1], (*idx)[rng.next_u64() % i]);
  }
}

}  // namespace

Status ExitTrainConfig::validate() const {
  if (hidden < 1 || hidden > kMaxExitHidden) {
    return Status::invalid_argument("exit predictor hidden size must be in [1, " +
                                    std::to_string(kMaxExitHidden) + "]");
  }
  if (epochs < 1) return Status::invalid_argument("--epochs must be at least 1");
  if (max_steps < 0) return Status::invalid_argument("max_steps must be ≥ 0");
  if (batch < 1) return Status::invalid_argument("batch must be at least 1");
  if (!(learning_rate > 0.0f) || !std::isfinite(learning_rate)) {
    return Status::invalid_argument("learning rate must be positive");
  }
  if (!(holdout >= 0.0f && holdout < 1.0f)) {
    return Status::invalid_argument("holdout must be in [0, 1)");
  }
  return Status();
}

double exit_loss(const ExitPredictors& p, const ExitDataset& data, int64_t layer) {
  const std::vector<ExitSample>& s = data.layers[sz(layer)];
  double total = 0;
  for (const ExitSample& x : s) total += bce(p.predict(layer, x.features), x.label);
  return s.empty() ? 0.0 : total / static_cast<double>(s.size());
}

std::vector<int64_t> calibrate_exits(const ExitPredictors& p, const ExitDataset& data) {
  std::vector<int64_t> counts(sz(data.n_layer), 0);
  for (int64_t t = 0; t < data.num_tokens(); ++t) {
    int64_t exit = data.n_layer - 1;
    for (int64_t l = 0; l + 1 < data.n_layer; ++l) {
      const ExitSample& s = data.layers[sz(l)][sz(t)];
      if (p.predict(l, s.features) > 0.5f && s.verified) {
        exit = l;
        break;
      }
    }
    ++counts[sz(exit)];
  }
  return counts;
}

Result<ExitTrainResult> train_exit_predictors(const ExitDataset& data,
                                              const ExitTrainConfig& config,
                                              const ExitTrainProgress& progress) {
  KEEL_TRY(config.validate());
  if (data.n_layer < 2 || static_cast<int64_t>(data.layers.size()) != data.n_layer - 1 ||
      data.num_tokens() == 0) {
    return Status::invalid_argument("exit training needs a non-empty dataset");
  }
  const auto n = sz(data.num_tokens());
  sampling::Rng rng(config.seed);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  shuffle(&order, rng);
  auto n_test = static_cast<size_t>(static_cast<double>(n) * config.holdout);
  if (n_test >= n) n_test = 0;
  const std::vector<size_t> test(order.end() - static_cast<ptrdiff_t>(n_test), order.end());
  std::vector<size_t> train(order.begin(), order.end() - static_cast<ptrdiff_t>(n_test));
  ExitTrainResult out;
  ExitPredictors& p = out.predictors;
  p.n_layer = data.n_layer;
  p.hidden = config.hidden;
  p.layers.resize(sz(data.n_layer - 1));
  p.exit_counts.assign(sz(data.n_layer), 0);
  const Flat f{config.hidden};
  std::vector<float> act(sz(config.hidden)), g(f.size());
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const std::vector<ExitSample>& s = data.layers[l];
    std::vector<float> v = init_layer(f, rng);
    Adam adam{std::vector<float>(f.size(), 0.0f), std::vector<float>(f.size(), 0.0f)};
    ExitLayerStats st;
    st.num_train = static_cast<int64_t>(train.size());
    st.num_test = static_cast<int64_t>(test.size());
    auto mean_loss = [&] {
      unflatten(v, f, &p.layers[l]);
      double total = 0;
      for (size_t i : train)
        total += bce(p.predict(static_cast<int64_t>(l), s[i].features), s[i].label);
      return total / static_cast<double>(train.size());
    };
    st.loss_before = mean_loss();
    int64_t steps = 0;
    for (int32_t e = 0; e < config.epochs; ++e) {
      if (config.max_steps > 0 && steps >= config.max_steps) break;
      shuffle(&train, rng);
      for (size_t b = 0; b < train.size(); b += sz(config.batch)) {
        if (config.max_steps > 0 && steps >= config.max_steps) break;
        const size_t end = std::min(train.size(), b + sz(config.batch));
        std::fill(g.begin(), g.end(), 0.0f);
        for (size_t i = b; i < end; ++i) accumulate(v, f, s[train[i]], &act, &g);
        adam.step(&v, g, config.learning_rate, 1.0f / static_cast<float>(end - b));
        ++steps;
      }
    }
    out.steps += steps;
    st.loss = mean_loss();
    const std::vector<size_t>& eval = test.empty() ? train : test;
    int64_t right = 0, positive = 0;
    for (size_t i : eval) {
      const bool says = p.predict(static_cast<int64_t>(l), s[i].features) > 0.5f;
      right += says == (s[i].label != 0) ? 1 : 0;
      positive += s[i].label;
    }
    st.accuracy = static_cast<double>(right) / static_cast<double>(eval.size());
    st.positive_rate = static_cast<double>(positive) / static_cast<double>(eval.size());
    out.layers.push_back(st);
    if (progress) progress(static_cast<int64_t>(l), st);
  }
  p.exit_counts = calibrate_exits(p, data);
  return out;
}

ExitPredictors random_exit_predictors(int64_t n_layer, int64_t hidden, uint64_t seed) {
  ExitPredictors p;
  p.n_layer = n_layer;
  p.hidden = hidden;
  p.layers.resize(sz(std::max<int64_t>(n_layer - 1, 0)));
  p.exit_counts.assign(sz(std::max<int64_t>(n_layer, 0)), 0);
  sampling::Rng rng(seed);
  const Flat f{hidden};
  for (LayerExitPredictor& layer : p.layers) unflatten(init_layer(f, rng), f, &layer);
  return p;
}

}  // namespace keel::draft
