// EarlyExitParams: whether and how a request decodes with SpecEE early exit (docs/speculative.md)
// — a plain value in GenerationRequest (the request field "early_exit": true | {...}) and
// EngineConfig (the server flag --early-exit). With it, a single-token decode step runs the
// layers in order, evaluates the exit predictors (draft/exit_predictor.h) on the active layers
// and stops at an accepted exit, sampling from that layer's LM-head logits; the K/V of the
// skipped layers are filled from the exited hidden state (model/early_exit.h). Greedy outputs may
// differ from full depth. Prefill and speculative verification passes always run full depth.
// Invariant of a validated value: threshold finite; every fixed layer in [0, kMaxExitLayer).
// Thread safety: a plain value.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace keel::engine {

inline constexpr int32_t kMaxExitLayer = 4096;

struct EarlyExitParams {
  bool enabled = false;
  // Exit when the predictor's P(exit) > threshold (the paper: 0.5). Above 1 no predictor ever
  // fires (full depth, for tests); below 0 every evaluated layer is verified (the full LM head's
  // argmax must still be a candidate).
  float threshold = 0.5f;
  // Layers that run a predictor, fixed; empty = SpecEE's two-level schedule (the offline ranking
  // from the exit file's calibration histogram ∪ the ring of recent exits ± 2). Layers at or
  // past the model's last layer are ignored.
  std::vector<int32_t> layers;

  // InvalidArgument naming the field ("early_exit.threshold", ...) when out of range.
  [[nodiscard]] Status validate() const;
  friend bool operator==(const EarlyExitParams&, const EarlyExitParams&) = default;
};

}  // namespace keel::engine
