// ExitPass: SpecEE's exit decisions for one forward pass (model::Context::forward_early_exit):
// which batch tokens may exit, each one's candidates (the draft head's top-4 for the token after
// it, or candidates the caller already has) and its ExitEvaluator, and the model::EarlyExit hook
// that runs them. The engine's step executor and `keel bench --exit-predictors` both build their
// passes here, so a benchmark measures the very code a request runs.
// Invariants: at most one row per batch token; a row's `active` mask, when given, has n_layer
// entries. Thread safety: one pass per forward call, used by the calling thread only; the
// predictors, head and masks it borrows must outlive it, and it must outlive the EarlyExit it
// binds (the hook captures `this`).
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "draft/draft_head.h"
#include "draft/exit_predictor.h"
#include "kernels/kernels.h"
#include "model/early_exit.h"

namespace keel::draft {

class ExitPass {
 public:
  // A pass over a batch of `n_tokens` tokens.
  ExitPass(const ExitPredictors& predictors, const model::Model& target, size_t n_tokens);

  // Batch token t may exit, at the layers `active` marks (n_layer entries, 1 = run the layer's
  // predictor; empty = every layer that has one), exiting when P > threshold and verified.
  // Candidates: 1..4 distinct ids.
  void add_row(size_t t, std::span<const int32_t> candidates, float threshold,
               std::span<const uint8_t> active);
  // add_row with the draft head's top-4 candidates for the token after `token`, from the previous
  // position's feature (n_embd floats).
  void add_row(size_t t, const DraftHead& head, std::span<const float> feature, int32_t token,
               float threshold, std::span<const uint8_t> active, kernels::Ops& ops,
               DraftScratch* scratch);

  [[nodiscard]] bool empty() const { return evals_.empty(); }
  // Token t's evaluator (null when t has no row): its counts after the pass.
  [[nodiscard]] const ExitEvaluator* evaluator(size_t t) const;

  // Sets ee->may_exit and ee->decide for the rows added; `ops` runs the predictors and must
  // outlive the forward call.
  void bind(model::EarlyExit* ee, kernels::Ops& ops);

 private:
  struct Row {
    std::span<const uint8_t> active;
  };
  const ExitPredictors& predictors_;
  const model::Model& target_;
  std::vector<int32_t> row_of_;      // [n_tokens] index into evals_ / rows_, or -1
  std::deque<ExitEvaluator> evals_;  // stable addresses
  std::vector<Row> rows_;
  std::vector<int32_t> candidates_;  // add_row's scratch
};

}  // namespace keel::draft
