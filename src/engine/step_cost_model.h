// StepCostModel: what a step costs, learnt from the steps run so far, and the prefill budget that
// keeps steps with decodes in them near a target time (so inter-token latency stays even while
// long prompts are prefilled in chunks — Sarathi-Serve's stall-free batching, with the chunk
// sized from measurements instead of a fixed number).
//
// Model: seconds ≈ a + b·prefill_tokens + c·decode_seqs, fitted by recursive least squares with
// exponential forgetting (recent steps weigh more, so it follows load from other processes).
// Pure data and arithmetic; owned by the engine thread.
#pragma once

#include <array>
#include <cstdint>

namespace keel::engine {

class StepCostModel {
 public:
  // Records a step that computed `prefill_tokens` prompt tokens and `decode_seqs` single-token
  // decodes in `seconds`.
  void observe(int32_t prefill_tokens, int32_t decode_seqs, double seconds);
  // True once enough steps were seen for predictions (and the per-token prefill cost is > 0).
  [[nodiscard]] bool ready() const;
  [[nodiscard]] double predict(int32_t prefill_tokens, int32_t decode_seqs) const;
  // The most prefill tokens a step with `decode_seqs` decodes may take to stay within
  // `target_seconds`, clamped to [min_tokens, max_tokens]; max_tokens until ready().
  [[nodiscard]] int32_t prefill_budget(int32_t decode_seqs, double target_seconds,
                                       int32_t min_tokens, int32_t max_tokens) const;
  [[nodiscard]] int64_t num_observed() const { return n_; }

  static constexpr double kForgetting = 0.98;  // weight of the past per step
  static constexpr int64_t kMinSteps = 8;

 private:
  std::array<double, 3> theta_ = {0, 0, 0};                 // a, b, c
  std::array<std::array<double, 3>, 3> p_ = {{{1e4, 0, 0},  // inverse information matrix
                                              {0, 1e4, 0},
                                              {0, 0, 1e4}}};
  int64_t n_ = 0;
  int64_t n_prefill_ = 0;  // steps with prefill tokens: b is only known after some
};

}  // namespace keel::engine
