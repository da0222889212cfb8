// EarlyExitHook: SpecEE early exit as the engine sees it (docs/speculative.md) — the exit
// predictors it binds at start, the submit check, each request's parameters and two-level layer
// schedule (exit_layer_schedule.h; the per-request state is EngineRequest::exit), what a step's
// executor gets of them (with a verification, its rows' candidates from the proposal its drafts
// came from) and what comes back (the exit layers, recorded in the schedule and the
// keel:early_exit_layers histogram; the feature the next step's candidates start from). The
// predictors themselves run on the executor thread (StepExecutor).
//
// Thread safety: bind() and check() from any thread; the rest on the engine thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "draft/draft_head.h"
#include "draft/exit_predictor_file.h"
#include "engine/engine_config.h"
#include "engine/engine_request.h"
#include "engine/metrics.h"
#include "engine/step_executor.h"
#include "model/model.h"

namespace keel::engine {

class EarlyExitHook {
 public:
  // The predictors: `given` (checked against the model), else EngineConfig::
  // exit_predictors_path, else the default file beside the model; none is no error unless the
  // config turns early exit on for every request (InvalidArgument saying why). The candidates
  // come from the draft `head` (null: none, `head_missing` says why).
  static Result<EarlyExitHook> bind(const model::Model& model, const EngineConfig& config,
                                    std::shared_ptr<const draft::ExitPredictorFile> given,
                                    const draft::DraftHead* head, const std::string& head_missing);

  // InvalidArgument when `request` (or the engine's default) asks for early exit and the engine
  // cannot run it; its own parameters are validated.
  [[nodiscard]] Status check(const GenerationRequest& request) const;
  // The predictors for the executor (null: none).
  [[nodiscard]] const draft::ExitPredictors* predictors() const {
    return file_ != nullptr ? &file_->predictors : nullptr;
  }
  // At admission: the request's parameters and layer schedule.
  void admit(const GenerationRequest& request, EarlyExitPart* part) const;
  // What the executor needs of the request this step, whose seq verifies `drafts` (none: a
  // decode or a prefill).
  [[nodiscard]] StepInput::Sample::EarlyExit sample(const EarlyExitPart& part,
                                                    const std::vector<int32_t>& drafts) const;
  // After the step: its exit (layers recorded in the schedule and `layers`, the feature kept).
  static void on_exit(EarlyExitPart* part, StepOutput::Exit& exit, Histogram* layers);
  // After the step: the draft head's proposal, whose candidates its verification will use.
  static void on_proposal(EarlyExitPart* part, const StepOutput::Proposal& proposal);

 private:
  std::shared_ptr<const draft::ExitPredictorFile> file_;
  const draft::DraftHead* head_ = nullptr;
  std::string missing_;  // why early exit cannot run; empty when it can
  EarlyExitParams defaults_;
  int32_t n_layer_ = 0;
};

}  // namespace keel::engine
