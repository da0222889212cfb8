// Truncation: top-k (nth_element + sort of k), top-p (progressive partial selection), min-p
// (a threshold in logit space: p_i >= min_p * p_max  <=>  logit_i >= max_logit + log(min_p)).
#include "sampling/truncation.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace keel::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr size_t kFirstNucleusPrefix = 128;

void collect_finite(std::span<const float> logits, std::vector<Candidate>* out) {
  out->clear();
  out->reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > kNegInf) out->push_back(Candidate{logits[i], static_cast<int32_t>(i)});
  }
}

// Keeps the k best candidates, sorted.
void keep_top_k(std::vector<Candidate>* c, size_t k) {
  if (k < c->size()) {
    std::nth_element(c->begin(), c->begin() + static_cast<std::ptrdiff_t>(k), c->end(),
                     ranks_before);
    c->resize(k);
  }
  std::sort(c->begin(), c->end(), ranks_before);
}

// Moves the best candidates to the front, sorted, in growing prefixes until the prefix holds at
// least `target` of the (unnormalised) mass; returns the prefix length.
size_t sort_nucleus_prefix(std::vector<Candidate>* c, float max_logit, double target) {
  const size_t n = c->size();
  size_t done = 0;
  size_t m = std::min(n, kFirstNucleusPrefix);
  double mass = 0.0;
  while (true) {
    if (m < n) {
      std::nth_element(c->begin() + static_cast<std::ptrdiff_t>(done),
                       c->begin() + static_cast<std::ptrdiff_t>(m), c->end(), ranks_before);
    }
    for (size_t i = done; i < m; ++i) mass += std::exp((*c)[i].logit - max_logit);
    done = m;
    if (mass >= target || m == n) break;
    m = std::min(n, m * 4);
  }
  std::sort(c->begin(), c->begin() + static_cast<std::ptrdiff_t>(done), ranks_before);
  return done;
}

// Keeps the smallest ranks_before-prefix whose probability reaches top_p.
void keep_nucleus(std::vector<Candidate>* c, bool sorted, float max_logit, float top_p) {
  double total = 0.0;
  for (const Candidate& x : *c) total += std::exp(x.logit - max_logit);
  const double target = static_cast<double>(top_p) * total;
  const size_t prefix = sorted ? c->size() : sort_nucleus_prefix(c, max_logit, target);
  size_t keep = prefix;  // if rounding leaves the sum just short of target, keep the prefix
  double cumulative = 0.0;
  for (size_t i = 0; i < prefix; ++i) {
    cumulative += std::exp((*c)[i].logit - max_logit);
    if (cumulative >= target) {
      keep = i + 1;
      break;
    }
  }
  c->resize(keep);
}

}  // namespace

bool truncate(std::span<float> logits, float max_logit, const TruncationParams& params,
              std::vector<Candidate>* candidates) {
  KEEL_CHECK(std::isfinite(max_logit));
  const size_t vocab_size = logits.size();
  const bool top_k_on = params.top_k > 0 && static_cast<size_t>(params.top_k) < vocab_size;
  const bool top_p_on = params.top_p < 1.0f;
  const bool min_p_on = params.min_p > 0.0f;
  const float min_p_floor = min_p_on ? max_logit + std::log(params.min_p) : kNegInf;

  if (!top_k_on && !top_p_on) {
    if (min_p_on) {
      for (float& logit : logits) {
        if (logit < min_p_floor) logit = kNegInf;
      }
    }
    return false;
  }

  collect_finite(logits, candidates);
  bool sorted = false;
  if (top_k_on) {
    keep_top_k(candidates, static_cast<size_t>(params.top_k));
    sorted = true;
  }
  if (top_p_on) keep_nucleus(candidates, sorted, max_logit, params.top_p);
  if (min_p_on) {
    std::erase_if(*candidates, [min_p_floor](const Candidate& x) { return x.logit < min_p_floor; });
  }
  std::fill(logits.begin(), logits.end(), kNegInf);
  for (const Candidate& x : *candidates) logits[static_cast<size_t>(x.token_id)] = x.logit;
  return true;
}

}  // namespace keel::sampling
