// ExitPass (see exit_pass.h).
#include "draft/exit_pass.h"

#include "core/check.h"

namespace keel::draft {

ExitPass::ExitPass(const ExitPredictors& predictors, const model::Model& target, size_t n_tokens)
    : predictors_(predictors), target_(target), row_of_(n_tokens, -1) {}

void ExitPass::add_row(size_t t, std::span<const int32_t> candidates, float threshold,
                       std::span<const uint8_t> active) {
  KEEL_CHECK(t < row_of_.size() && row_of_[t] < 0);
  KEEL_CHECK(active.empty() || static_cast<int64_t>(active.size()) == predictors_.n_layer);
  evals_.emplace_back(predictors_, target_, threshold);
  evals_.back().begin(candidates);
  rows_.push_back({active});
  row_of_[t] = static_cast<int32_t>(rows_.size() - 1);
}

void ExitPass::add_row(size_t t, const DraftHead& head, std::span<const float> feature,
                       int32_t token, float threshold, std::span<const uint8_t> active,
                       kernels::Ops& ops, DraftScratch* scratch) {
  head.candidate_ids(feature, token, kExitCandidates, ops, scratch, &candidates_);
  add_row(t, candidates_, threshold, active);
}

const ExitEvaluator* ExitPass::evaluator(size_t t) const {
  if (t >= row_of_.size() || row_of_[t] < 0) return nullptr;
  return &evals_[static_cast<size_t>(row_of_[t])];
}

void ExitPass::bind(model::EarlyExit* ee, kernels::Ops& ops) {
  ee->may_exit.assign(row_of_.size(), 0);
  for (size_t t = 0; t < row_of_.size(); ++t) ee->may_exit[t] = row_of_[t] >= 0 ? 1 : 0;
  ee->decide = [this, &ops](int64_t il, size_t t, std::span<const float> x) {
    const auto k = static_cast<size_t>(row_of_[t]);
    const std::span<const uint8_t> active = rows_[k].active;
    if (!active.empty() && !active[static_cast<size_t>(il)]) return false;
    return evals_[k].at_layer(il, x, ops);
  };
}

}  // namespace keel::draft
