// Logprobs: log-sum-exp, chosen-token logprob and rank, and top-N selection.
#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "sampling/truncation.h"

namespace keel::sampling {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr size_t kMaxInsertionTopN = 32;

float sanitized(float x) { return std::isnan(x) ? -kInf : x; }

}  // namespace

std::vector<Candidate> top_candidates(std::span<const float> logits, size_t top_n) {
  std::vector<Candidate> top;
  if (top_n == 0) return top;
  top.reserve(top_n <= kMaxInsertionTopN ? top_n : logits.size());
  if (top_n > kMaxInsertionTopN) {
    for (size_t i = 0; i < logits.size(); ++i) {
      top.push_back(Candidate{sanitized(logits[i]), static_cast<int32_t>(i)});
    }
    auto nth = top.begin() + static_cast<std::ptrdiff_t>(top_n);
    if (top_n < top.size()) std::nth_element(top.begin(), nth, top.end(), ranks_before);
    top.resize(top_n);
    std::sort(top.begin(), top.end(), ranks_before);
    return top;
  }
  // Running sorted list: an entry enters only if it beats the current last one.
  for (size_t i = 0; i < logits.size(); ++i) {
    const Candidate c{sanitized(logits[i]), static_cast<int32_t>(i)};
    if (top.size() == top_n && !ranks_before(c, top.back())) continue;
    if (top.size() == top_n) top.pop_back();
    top.insert(std::upper_bound(top.begin(), top.end(), c, ranks_before), c);
  }
  return top;
}

double log_sum_exp(std::span<const float> logits) {
  float max_logit = -kInf;
  for (float x : logits) max_logit = std::max(max_logit, sanitized(x));
  if (max_logit == -kInf || max_logit == kInf) return max_logit;
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(sanitized(x)) - max_logit);
  return static_cast<double>(max_logit) + std::log(sum);
}

double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits) {
  KEEL_CHECK(p_logits.size() == q_logits.size());
  const double zp = log_sum_exp(p_logits), zq = log_sum_exp(q_logits);
  double kl = 0;
  for (size_t i = 0; i < p_logits.size(); ++i) {
    const double lp = p_logits[i] - zp;
    kl += std::exp(lp) * (lp - (q_logits[i] - zq));
  }
  return std::max(kl, 0.0);
}

Logprobs compute_logprobs(std::span<const float> logits, int32_t chosen, int32_t top_n) {
  KEEL_CHECK(chosen >= 0 && static_cast<size_t>(chosen) < logits.size());
  KEEL_CHECK(top_n >= 0);
  const double lse = log_sum_exp(logits);
  size_t num_pos_inf = 0;
  if (lse == kInf) {
    for (float x : logits) num_pos_inf += x == kInf ? 1 : 0;
  }
  auto logprob_of = [&](float logit) -> float {
    if (lse == kInf) return logit == kInf ? -std::log(static_cast<float>(num_pos_inf)) : -kInf;
    if (lse == -kInf) return -kInf;
    return static_cast<float>(static_cast<double>(logit) - lse);
  };

  Logprobs out;
  const float chosen_logit = sanitized(logits[static_cast<size_t>(chosen)]);
  out.chosen = TokenLogprob{chosen, logprob_of(chosen_logit)};
  int32_t num_better = 0;
  for (float x : logits) num_better += sanitized(x) > chosen_logit ? 1 : 0;
  out.chosen_rank = num_better + 1;

  const size_t n = std::min(static_cast<size_t>(top_n), logits.size());
  for (const Candidate& c : top_candidates(logits, n)) {
    out.top.push_back(TokenLogprob{c.token_id, logprob_of(c.logit)});
  }
  return out;
}

}  // namespace keel::sampling
