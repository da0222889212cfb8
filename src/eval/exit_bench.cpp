// ExitBench (see exit_bench.h).
#include "eval/exit_bench.h"

#include <algorithm>
#include <chrono>
#include <span>

#include "core/check.h"
#include "core/index_cast.h"

#include "draft/draft_head_file.h"
#include "draft/draft_trainer.h"
#include "draft/exit_pass.h"
#include "draft/exit_predictor_file.h"
#include "draft/exit_trainer.h"

namespace keel::eval {
namespace {

constexpr uint64_t kRandomSeed = 1;
constexpr int64_t kPredictorHidden = 512;  // the paper's 12 → 512 → 1

}  // namespace

ExitBench::ExitBench(const model::Model& m, std::unique_ptr<draft::DraftHead> head,
                     draft::ExitPredictors predictors, std::string source)
    : model_(m),
      head_(std::move(head)),
      predictors_(std::move(predictors)),
      source_(std::move(source)) {
  reset();
}

Result<std::unique_ptr<ExitBench>> ExitBench::create(const model::Model& m, const std::string& spec,
                                                     const std::string& draft_head_path) {
  if (m.hparams().n_layer < 2) {
    return Status::invalid_argument("--exit-predictors needs a model of at least 2 layers");
  }
  if (spec == "random") {
    draft::DraftTrainConfig head_config;  // the trainer's initial weights: H = 256, seeded
    head_config.seed = kRandomSeed;
    auto head = std::make_unique<draft::DraftHead>(draft::init_draft_head(m, head_config), m);
    return std::unique_ptr<ExitBench>(new ExitBench(
        m, std::move(head),
        draft::random_exit_predictors(m.hparams().n_layer, kPredictorHidden, kRandomSeed),
        "random draft head and predictors (seed 1): random weights exit nowhere, this measures "
        "cost only"));
  }
  KEEL_ASSIGN_OR_RETURN(draft::ExitPredictorFile file, draft::load_exit_predictors(spec, m));
  const std::string head_path =
      draft_head_path.empty() ? draft::default_draft_head_path(m.file().path()) : draft_head_path;
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<draft::DraftHead> head,
                        draft::load_draft_head(head_path, m));
  return std::unique_ptr<ExitBench>(new ExitBench(m, std::move(head), std::move(file.predictors),
                                                  spec + " with draft head " + head_path));
}

void ExitBench::reset() { feature_.assign(static_cast<size_t>(model_.hparams().n_embd), 0.0f); }

Status ExitBench::step(model::Context& ctx, const model::Batch& batch, model::KvStorage& kv,
                       kernels::Ops& ops, std::vector<float>* logits, bool head,
                       double* head_seconds) {
  KEEL_CHECK(batch.size() == 1);
  const auto t0 = std::chrono::steady_clock::now();
  draft::ExitPass pass(predictors_, model_, 1);
  if (head) {
    pass.add_row(0, *head_, feature_, batch.tokens[0], kThreshold, {}, ops, &scratch_);
    *head_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } else {
    const int32_t given[] = {0, 1, 2, 3};  // any 4 ids cost the same
    pass.add_row(0,
                 std::span<const int32_t>(given, std::min<size_t>(4, sz(model_.hparams().n_vocab))),
                 kThreshold, {});
  }
  model::EarlyExit ee;
  pass.bind(&ee, ops);
  KEEL_TRY(ctx.forward_early_exit(batch, kv, ops, &ee, logits, &hidden_));
  if (ee.exit_layer[0] != model_.hparams().n_layer - 1) {
    return Status::internal("a token exited at threshold 2");
  }
  feature_.swap(hidden_);
  return Status();
}

}  // namespace keel::eval
