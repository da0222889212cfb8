// LengthHead (see head.h).
#include "predictor/head.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/check.h"
#include "core/index_cast.h"
#include "core/result.h"

namespace keel::predictor {
namespace {

Status check_vector(const char* name, const std::vector<float>& v, int64_t want) {
  if (static_cast<int64_t>(v.size()) != want) {
    return Status::invalid_argument(std::string("predictor head: ") + name + " has " +
                                    std::to_string(v.size()) + " values, expected " +
                                    std::to_string(want));
  }
  for (float x : v) {
    if (!std::isfinite(x)) {
      return Status::invalid_argument(std::string("predictor head: ") + name +
                                      " holds a value that is not finite");
    }
  }
  return Status();
}

}  // namespace

LengthHead LengthHead::zeros(LengthBuckets buckets, int64_t input_dim, int64_t hidden) {
  LengthHead h;
  h.buckets = buckets;
  h.input_dim = input_dim;
  h.hidden = hidden;
  h.feature_mean.assign(sz(input_dim), 0.0f);
  h.feature_scale.assign(sz(input_dim), 1.0f);
  h.w1.assign(sz(hidden * input_dim), 0.0f);
  h.b1.assign(sz(hidden), 0.0f);
  h.w2.assign(sz(buckets.num_buckets() * h.last_dim()), 0.0f);
  h.b2.assign(sz(buckets.num_buckets()), 0.0f);
  return h;
}

Status LengthHead::validate() const {
  KEEL_TRY(buckets.validate());
  constexpr int64_t kMaxDim = 1 << 16;
  if (input_dim < 1 || input_dim > kMaxDim || hidden < 0 || hidden > kMaxDim) {
    return Status::invalid_argument("predictor head: input dim " + std::to_string(input_dim) +
                                    " or hidden units " + std::to_string(hidden) + " out of range");
  }
  const int64_t b = num_buckets();
  KEEL_TRY(check_vector("feature_mean", feature_mean, input_dim));
  KEEL_TRY(check_vector("feature_scale", feature_scale, input_dim));
  KEEL_TRY(check_vector("w1", w1, hidden * input_dim));
  KEEL_TRY(check_vector("b1", b1, hidden));
  KEEL_TRY(check_vector("w2", w2, b * last_dim()));
  KEEL_TRY(check_vector("b2", b2, b));
  for (float s : feature_scale) {
    if (!(s > 0.0f)) return Status::invalid_argument("predictor head: a feature scale is not > 0");
  }
  return Status();
}

void LengthHead::standardize(std::span<const float> features, std::span<float> z) const {
  for (size_t j = 0; j < sz(input_dim); ++j) {
    z[j] = (features[j] - feature_mean[j]) * feature_scale[j];
  }
}

void LengthHead::logits(std::span<const float> z, std::span<float> h, std::span<float> out) const {
  std::span<const float> last = z;
  if (hidden > 0) {
    for (size_t u = 0; u < sz(hidden); ++u) {
      const float* w = w1.data() + u * sz(input_dim);
      float a = b1[u];
      for (size_t j = 0; j < sz(input_dim); ++j) a += w[j] * z[j];
      h[u] = std::max(a, 0.0f);
    }
    last = h.first(sz(hidden));
  }
  const size_t k = sz(last_dim());
  for (size_t c = 0; c < sz(num_buckets()); ++c) {
    const float* w = w2.data() + c * k;
    float a = b2[c];
    for (size_t j = 0; j < k; ++j) a += w[j] * last[j];
    out[c] = a;
  }
}

std::vector<float> LengthHead::probabilities(std::span<const float> features) const {
  KEEL_CHECK(static_cast<int64_t>(features.size()) == input_dim);
  std::vector<float> z(sz(input_dim)), h(sz(hidden)), p(sz(num_buckets()));
  standardize(features, z);
  logits(z, h, p);
  softmax_in_place(p);
  return p;
}

void softmax_in_place(std::span<float> v) {
  if (v.empty()) return;
  const float m = *std::max_element(v.begin(), v.end());
  double sum = 0;
  for (float& x : v) {
    x = std::exp(x - m);
    sum += x;
  }
  const auto inv = static_cast<float>(1.0 / sum);
  for (float& x : v) x *= inv;
}

}  // namespace keel::predictor
