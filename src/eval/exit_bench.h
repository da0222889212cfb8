// ExitBench, the "+exit" rows of `keel bench --exit-predictors FILE|random` (model_bench.h): the
// SpecEE machinery a decode step carries when early exit is on — the draft head's top-4
// candidates, then at every layer that has a predictor the 4-row LM-head logits, softmax/Δ
// features and the 12→512→1 MLP — with a threshold above 1 so that no token exits: a tg step with
// it costs what the predictors cost. `random` builds a seeded random draft head and predictors of
// the model's shape in memory (such weights exit nowhere; they measure cost only); FILE loads
// trained predictors (and the draft head beside the model, or the path given). The step goes
// through draft::ExitPass and model::Context::forward_early_exit, the code a request runs
// (engine/step_executor.cpp).
// Thread safety: one ExitBench per benchmark thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "draft/draft_head.h"
#include "draft/exit_predictor.h"
#include "kernels/kernels.h"
#include "model/batch.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "model/model.h"

namespace keel::eval {

class ExitBench {
 public:
  // spec: "random" or an exit predictor file; draft_head_path: "" = beside the model (FILE only).
  static Result<std::unique_ptr<ExitBench>> create(const model::Model& m, const std::string& spec,
                                                   const std::string& draft_head_path);

  // What the output states: "random (seed 1; exits nowhere, cost only)" or the files.
  [[nodiscard]] const std::string& source() const { return source_; }
  [[nodiscard]] float threshold() const { return kThreshold; }

  // A run starts from a zero feature (the previous position's normed hidden state).
  void reset();
  // One decode step of `batch` (one token with logits) with the machinery active; the step's
  // hidden output is the next step's feature. `head`: the candidates are the draft head's top-4,
  // their seconds added to *head_seconds; otherwise four fixed ids stand for candidates a drafter
  // already produced (the predictors' own cost). Errors: those of forward_early_exit; Internal if
  // a token exited.
  Status step(model::Context& ctx, const model::Batch& batch, model::KvStorage& kv,
              kernels::Ops& ops, std::vector<float>* logits, bool head, double* head_seconds);

 private:
  static constexpr float kThreshold = 2.0f;  // > 1: P(exit) never passes it
  ExitBench(const model::Model& m, std::unique_ptr<draft::DraftHead> head,
            draft::ExitPredictors predictors, std::string source);

  const model::Model& model_;
  std::unique_ptr<draft::DraftHead> head_;
  draft::ExitPredictors predictors_;
  std::string source_;
  std::vector<float> feature_, hidden_;
  draft::DraftScratch scratch_;
};

}  // namespace keel::eval
