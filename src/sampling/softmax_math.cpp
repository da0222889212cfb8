// Softmax arithmetic: fixed-lane reductions (kLanes independent accumulators combined in a fixed
// order), so vectorised and scalar builds produce identical sums.
#include "sampling/softmax_math.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace keel::sampling {
namespace {

constexpr size_t kLanes = 8;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The maximum of values (NaN-free), -inf when empty.
float lane_max(std::span<const float> values) {
  std::array<float, kLanes> lanes;
  lanes.fill(kNegInf);
  size_t i = 0;
  for (; i + kLanes <= values.size(); i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) lanes[j] = std::max(lanes[j], values[i + j]);
  }
  for (; i < values.size(); ++i) lanes[i % kLanes] = std::max(lanes[i % kLanes], values[i]);
  return *std::max_element(lanes.begin(), lanes.end());
}

double lane_sum(std::span<const float> values) {
  std::array<double, kLanes> lanes{};
  size_t i = 0;
  for (; i + kLanes <= values.size(); i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) lanes[j] += static_cast<double>(values[i + j]);
  }
  for (; i < values.size(); ++i) lanes[i % kLanes] += static_cast<double>(values[i]);
  double sum = 0.0;
  for (double lane : lanes) sum += lane;
  return sum;
}

}  // namespace

float prepare_logits(std::span<float> logits, float temperature) {
  if (temperature != 1.0f) {
    for (float& x : logits) x = std::isnan(x) ? kNegInf : x / temperature;
  } else {
    for (float& x : logits) x = std::isnan(x) ? kNegInf : x;
  }
  return lane_max(logits);
}

void compute_weights(std::span<const float> logits, float max_logit, std::span<float> weights) {
  KEEL_CHECK(logits.size() == weights.size());
  const size_t n = logits.size();
  const float* in = logits.data();
  float* out = weights.data();
  for (size_t i = 0; i < n; ++i) out[i] = exp_nonpositive(in[i] - max_logit);
}

double sum_weight_blocks(std::span<const float> weights, std::span<double> block_sums) {
  const size_t num_blocks = (weights.size() + kWeightBlockSize - 1) / kWeightBlockSize;
  KEEL_CHECK(block_sums.size() >= num_blocks);
  double total = 0.0;
  for (size_t b = 0; b < num_blocks; ++b) {
    const size_t begin = b * kWeightBlockSize;
    const size_t size = std::min(kWeightBlockSize, weights.size() - begin);
    block_sums[b] = lane_sum(weights.subspan(begin, size));
    total += block_sums[b];
  }
  return total;
}

int32_t pick_weighted(std::span<const float> weights, std::span<const double> block_sums,
                      double target) {
  const size_t num_blocks = (weights.size() + kWeightBlockSize - 1) / kWeightBlockSize;
  // The block where the running sum passes target; the last non-empty one if rounding leaves the
  // total just short of it.
  size_t block = num_blocks;
  size_t last_nonempty = num_blocks;
  double before = 0.0;
  for (size_t b = 0; b < num_blocks; ++b) {
    if (block_sums[b] <= 0.0) continue;
    last_nonempty = b;
    if (before + block_sums[b] > target) {
      block = b;
      break;
    }
    before += block_sums[b];
  }
  if (block == num_blocks) block = last_nonempty;
  KEEL_CHECK_MSG(block < num_blocks, "pick_weighted: all weights are zero");
  const size_t begin = block * kWeightBlockSize;
  const size_t end = std::min(weights.size(), begin + kWeightBlockSize);
  double cumulative = before;
  size_t last_positive = begin;
  for (size_t i = begin; i < end; ++i) {
    if (weights[i] <= 0.0f) continue;
    cumulative += static_cast<double>(weights[i]);
    last_positive = i;
    if (cumulative > target) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(last_positive);  // within-block rounding fell just short
}

int32_t argmax(std::span<const float> values) {
  KEEL_CHECK(!values.empty());
  float best = kNegInf;
  for (float x : values) best = x > best ? x : best;  // NaN never compares greater
  if (best == kNegInf) return 0;
  const auto it = std::find(values.begin(), values.end(), best);
  return static_cast<int32_t>(it - values.begin());
}

}  // namespace keel::sampling
