// Truncation by histogram: each finite token gets a bucket key (max_logit - logit) * 32, best
// bucket first; the boundary bucket of top-k or top-p is found by a scan over 4096 counters and
// only its tokens are sorted.
#include "sampling/truncation.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "sampling/softmax_math.h"

namespace keel::sampling {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
constexpr uint16_t kNumBuckets = 4096;
constexpr uint16_t kExcludedKey = kNumBuckets;  // -inf logits: in no bucket
constexpr float kBucketsPerLogit = 32.0f;
constexpr float kMaxBucketedDistance = static_cast<float>(kNumBuckets - 1) / kBucketsPerLogit;

}  // namespace

void Truncator::compute_keys(std::span<const float> logits, float max_logit) {
  keys_.resize(logits.size());
  const float* in = logits.data();
  uint16_t* out = keys_.data();
  // Monotone non-decreasing in max_logit - logit: a better token never has a larger key.
  for (size_t i = 0; i < logits.size(); ++i) {
    const float distance = std::min(max_logit - in[i], kMaxBucketedDistance);
    const auto key = static_cast<uint16_t>(static_cast<int32_t>(distance * kBucketsPerLogit));
    out[i] = in[i] == kMinusInf ? kExcludedKey : key;
  }
}

void Truncator::build_counts() {
  counts_.assign(kNumBuckets + 1, 0);
  for (uint16_t key : keys_) ++counts_[key];
  num_finite_ = keys_.size() - counts_[kExcludedKey];
}

void Truncator::build_masses(std::span<const float> weights) {
  masses_.assign(kNumBuckets + 1, 0.0);
  for (size_t i = 0; i < keys_.size(); ++i) masses_[keys_[i]] += static_cast<double>(weights[i]);
}

void Truncator::select_top_k(std::span<const float> logits, size_t k) {
  uint16_t boundary = 0;  // the bucket holding the k-th best token
  size_t above = 0;       // tokens in better buckets
  while (above + counts_[boundary] < k) above += counts_[boundary++];
  survivors_.clear();
  bucket_.clear();
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i] > boundary) continue;
    const Candidate c{logits[i], static_cast<int32_t>(i)};
    (keys_[i] < boundary ? survivors_ : bucket_).push_back(c);
  }
  const auto need = static_cast<std::ptrdiff_t>(k - above);
  std::partial_sort(bucket_.begin(), bucket_.begin() + need, bucket_.end(), ranks_before);
  survivors_.insert(survivors_.end(), bucket_.begin(), bucket_.begin() + need);
  std::sort(survivors_.begin(), survivors_.end(), ranks_before);
}

void Truncator::keep_nucleus_of_survivors(float max_logit, float top_p) {
  auto weight = [max_logit](const Candidate& c) {
    return static_cast<double>(exp_nonpositive(c.logit - max_logit));
  };
  double total = 0.0;
  for (const Candidate& c : survivors_) total += weight(c);
  const double target = static_cast<double>(top_p) * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < survivors_.size(); ++i) {
    cumulative += weight(survivors_[i]);
    if (cumulative >= target) {
      survivors_.resize(i + 1);
      return;
    }
  }
}

void Truncator::apply_dense_top_p(std::span<float> logits, std::span<float> weights, float top_p) {
  double total = 0.0;
  for (uint16_t b = 0; b < kNumBuckets; ++b) total += masses_[b];
  const double target = static_cast<double>(top_p) * total;
  uint16_t boundary = 0;  // the bucket where the running mass reaches target
  double before = 0.0;    // mass of better buckets
  while (boundary < kNumBuckets && before + masses_[boundary] < target) {
    before += masses_[boundary++];
  }
  if (boundary == kNumBuckets) return;  // rounding: the whole distribution is the nucleus
  bucket_.clear();
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i] == boundary) bucket_.push_back(Candidate{logits[i], static_cast<int32_t>(i)});
  }
  std::sort(bucket_.begin(), bucket_.end(), ranks_before);
  Candidate last_kept = bucket_.back();
  double cumulative = before;
  for (const Candidate& c : bucket_) {
    cumulative += static_cast<double>(weights[static_cast<size_t>(c.token_id)]);
    if (cumulative >= target) {
      last_kept = c;
      break;
    }
  }
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i] > boundary ||
        (keys_[i] == boundary &&
         ranks_before(last_kept, Candidate{logits[i], static_cast<int32_t>(i)}))) {
      logits[i] = kMinusInf;
      weights[i] = 0.0f;
    }
  }
}

bool Truncator::apply(std::span<float> logits, std::span<float> weights, float max_logit,
                      const TruncationParams& params) {
  KEEL_CHECK(logits.size() == weights.size());
  KEEL_CHECK(std::isfinite(max_logit));
  const bool top_p_on = params.top_p < 1.0f;
  const bool min_p_on = params.min_p > 0.0f;
  bool top_k_on = params.top_k > 0 && static_cast<size_t>(params.top_k) < logits.size();
  if (top_k_on || top_p_on) {
    compute_keys(logits, max_logit);
    build_counts();
    top_k_on = top_k_on && static_cast<size_t>(params.top_k) < num_finite_;
  }

  if (top_k_on) {
    select_top_k(logits, static_cast<size_t>(params.top_k));
    if (top_p_on) keep_nucleus_of_survivors(max_logit, params.top_p);
    if (min_p_on) {
      std::erase_if(survivors_, [&](const Candidate& c) {
        return exp_nonpositive(c.logit - max_logit) < params.min_p;
      });
    }
    std::fill(logits.begin(), logits.end(), kMinusInf);
    std::fill(weights.begin(), weights.end(), 0.0f);
    for (const Candidate& c : survivors_) {
      logits[static_cast<size_t>(c.token_id)] = c.logit;
      weights[static_cast<size_t>(c.token_id)] = exp_nonpositive(c.logit - max_logit);
    }
    return true;
  }

  compute_weights(logits, max_logit, weights);
  if (top_p_on) {
    build_masses(weights);
    apply_dense_top_p(logits, weights, params.top_p);
  }
  if (min_p_on) {
    for (size_t i = 0; i < logits.size(); ++i) {
      const bool keep = weights[i] >= params.min_p;
      logits[i] = keep ? logits[i] : kMinusInf;
      weights[i] = keep ? weights[i] : 0.0f;
    }
  }
  return false;
}

}  // namespace keel::sampling
