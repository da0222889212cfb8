// `keel train-exit`: generates the target's own greedy text, records per layer SpecEE's 12
// features of the draft head's top-4 candidates and the label (draft/exit_dataset.h), trains one
// predictor per layer (draft/exit_trainer.h), reports each one's loss and held-out accuracy and
// the calibration histogram, and writes the file beside the model (draft/exit_predictor_file.h).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "commands.h"
#include "draft/draft_head_file.h"
#include "draft/exit_dataset.h"
#include "draft/exit_predictor_file.h"
#include "draft/exit_trainer.h"
#include "draft/target_digest.h"
#include "host/progress_reporter.h"
#include "model_loading.h"

namespace keel::cli {
namespace {

using Clock = std::chrono::steady_clock;
Status train(const TrainExitOptions& o, const host::ComputeSetup& setup) {
  draft::ExitTrainConfig tc;
  tc.hidden = o.hidden;
  tc.epochs = o.epochs;
  tc.seed = o.seed;
  KEEL_TRY(tc.validate());
  ThreadPool pool(setup.threads);
  KEEL_ASSIGN_OR_RETURN(LoadedModel loaded,
                        load_model(o.model_path, o.compute, model::ModelOptions{}, pool));
  const model::Model& m = *loaded.model;
  const std::string head_path =
      o.draft_head_path.empty() ? draft::default_draft_head_path(o.model_path) : o.draft_head_path;
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<draft::DraftHead> head,
                        draft::load_draft_head(head_path, m));
  draft::DraftDataSpec spec;
  spec.tokens = o.tokens;
  spec.seq_len = o.seq_len;
  spec.seed = o.seed;
  spec.bos = loaded.tokenizer->bos_id() >= 0 ? loaded.tokenizer->bos_id() : 0;
  spec.stop_ids.assign(loaded.tokenizer->eog_ids().begin(), loaded.tokenizer->eog_ids().end());
  if (loaded.tokenizer->bos_id() >= 0) spec.stop_ids.push_back(loaded.tokenizer->bos_id());
  KEEL_TRY(spec.validate());
  kernels::Ops ops(setup.isa, &pool);
  auto t = Clock::now();
  KEEL_ASSIGN_OR_RETURN(draft::ExitDataset data, draft::build_exit_dataset(m, *head, spec, ops));
  std::printf("data: %lld tokens x %zu layers from %lld greedy sequences in %.1f s\n",
              static_cast<long long>(data.num_tokens()), data.layers.size(),
              static_cast<long long>(data.num_sequences), host::seconds_since(t));
  t = Clock::now();
  KEEL_ASSIGN_OR_RETURN(
      draft::ExitTrainResult r,
      draft::train_exit_predictors(data, tc, [](int64_t l, const draft::ExitLayerStats& s) {
        std::printf(
            "layer %lld: BCE %.4f -> %.4f, held-out accuracy %.4f (label-1 share %.4f, %lld "
            "held out)\n",
            static_cast<long long>(l), s.loss_before, s.loss, s.accuracy, s.positive_rate,
            static_cast<long long>(s.num_test));
        std::fflush(stdout);
      }));
  std::printf("trained %lld Adam steps in %.1f s; calibration exits per layer:",
              static_cast<long long>(r.steps), host::seconds_since(t));
  for (int64_t c : r.predictors.exit_counts) std::printf(" %lld", static_cast<long long>(c));
  std::printf("\n");
  draft::ExitPredictorFile f;
  f.predictors = std::move(r.predictors);
  f.n_embd = m.hparams().n_embd;
  f.n_vocab = m.hparams().n_vocab;
  f.target_digest = draft::target_digest(m);
  f.target_name = std::filesystem::path(loaded.path).filename().string();
  f.train_tokens = data.num_tokens();
  f.train_epochs = o.epochs;
  f.train_seed = o.seed;
  for (const draft::ExitLayerStats& s : r.layers)
    f.accuracy.push_back(static_cast<float>(s.accuracy));
  f.command = o.command_line;
  const std::string out =
      o.output_path.empty() ? draft::default_exit_path(o.model_path) : o.output_path;
  KEEL_TRY(draft::save_exit_predictors(f, out));
  std::printf("wrote %s (target digest %s)\n", out.c_str(),
              draft::digest_hex(f.target_digest).c_str());
  return Status();
}

}  // namespace

int run_train_exit(const TrainExitOptions& opts) {
  auto setup = host::setup_compute(opts.compute);
  if (!setup.ok()) return report_error(setup.status());
  const Status s = train(opts, *setup);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
