// LoraLayout: which base matrices a trained LoRA adapter adapts and where each one's A and B live
// in one flat parameter vector (the optimizer, the gradient and the adapter writer all walk that
// vector). A slot adapts W [out][in] of one layer: A [rank][in] at a_offset and B [out][rank] at
// b_offset, row-major, so that the adapted projection is y = W·x + scale·B·(A·x) with
// scale = alpha / rank — llama.cpp's and keel's LoRA (model/lora_adapter.h).
//
// Invariants of a made layout: slots in layer order, then LoraTarget order; offsets contiguous
// (slot i's A, then its B, then slot i+1's A); num_params = the end of the last B.
// Thread safety: plain data and pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/result.h"
#include "model/lora_adapter.h"
#include "model/model.h"

namespace keel::train {

struct LoraConfig {
  int64_t rank = 8;                        // in [1, 4096]
  float alpha = 16.0f;                     // adapter.lora.alpha; scale = alpha / rank; > 0
  std::vector<model::LoraTarget> targets;  // adapted in every layer; empty = all seven

  [[nodiscard]] Status validate() const;
};

struct LoraSlot {
  int64_t layer = 0;
  model::LoraTarget target = model::LoraTarget::kQ;
  int64_t in = 0;       // W's columns (A's row width)
  int64_t out = 0;      // W's rows (B's rows)
  size_t a_offset = 0;  // A [rank][in]
  size_t b_offset = 0;  // B [out][rank]
};

struct LoraLayout {
  int64_t rank = 0;
  float alpha = 0.0f;
  std::vector<LoraSlot> slots;
  // [n_layer][target] → index into slots, -1 when that matrix is not adapted.
  std::vector<std::array<int32_t, model::kNumLoraTargets>> slot_of;
  size_t num_params = 0;

  [[nodiscard]] double scale() const {
    return static_cast<double>(alpha) / static_cast<double>(rank);
  }
  // The slot adapting `t` in layer `il`, or null.
  [[nodiscard]] const LoraSlot* find(int64_t il, model::LoraTarget t) const;
};

// The layout for `base`. InvalidArgument for a bad config; Unsupported for a mixture-of-experts
// model or an architecture the trainer has no backward pass for.
Result<LoraLayout> make_lora_layout(const model::Model& base, const LoraConfig& config);

// The usual start: every A uniform in ±1/sqrt(in) (PyTorch's kaiming_uniform with a = sqrt(5),
// as PEFT initialises LoRA A), every B zero — the adapter starts as the identity. Seeded, and the
// same on every platform (no std:: distributions).
template <typename T>
std::vector<T> init_lora_params(const LoraLayout& layout, uint64_t seed);

// Both A and B random (tests): A uniform in ±a_range, B uniform in ±b_range.
template <typename T>
std::vector<T> random_lora_params(const LoraLayout& layout, uint64_t seed, double a_range,
                                  double b_range);

// A uniform double in [0, 1) from a 64-bit counter-based hash of (seed, index): SplitMix64.
double uniform01(uint64_t seed, uint64_t index);

}  // namespace keel::train
