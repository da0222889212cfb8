// `keel train-draft`: generates the target's own text and hidden states (draft/draft_dataset.h),
// trains the draft head on them (draft/draft_trainer.h), reports the loss and top-1 agreement per
// epoch, and writes the head file beside the model (draft/draft_head_file.h) bound to the
// model's digest, with the command line that produced it.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "commands.h"
#include "draft/draft_dataset.h"
#include "draft/draft_head_file.h"
#include "draft/draft_trainer.h"
#include "draft/target_digest.h"
#include "host/progress_reporter.h"
#include "model_loading.h"

namespace keel::cli {
namespace {

using Clock = std::chrono::steady_clock;
Status train(const TrainDraftOptions& o, const host::ComputeSetup& setup) {
  draft::DraftTrainConfig tc;
  tc.hidden = o.hidden;
  tc.epochs = o.epochs;
  tc.learning_rate = o.learning_rate;
  tc.feature_weight = o.feature_weight;
  tc.seed = o.seed;
  KEEL_TRY(tc.validate());
  ThreadPool pool(setup.threads);
  KEEL_ASSIGN_OR_RETURN(LoadedModel loaded,
                        load_model(o.model_path, o.compute, model::ModelOptions{}, pool));
  const model::Model& m = *loaded.model;
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
  KEEL_ASSIGN_OR_RETURN(draft::DraftDataset data, draft::build_draft_dataset(m, spec, ops));
  std::printf("data: %lld pairs from %lld sequences of the model's own text in %.1f s\n",
              static_cast<long long>(data.pairs.size()), static_cast<long long>(data.num_sequences),
              host::seconds_since(t));
  t = Clock::now();
  KEEL_ASSIGN_OR_RETURN(
      draft::DraftTrainResult r,
      draft::train_draft_head(data, m, tc, [](int32_t epoch, const draft::DraftLoss& l) {
        std::printf("epoch %d: loss %.4f, cross-entropy %.4f, top-1 agreement %.4f\n", epoch + 1,
                    l.loss, l.cross_entropy, l.accuracy);
        std::fflush(stdout);
      }));
  const draft::DraftLoss final_loss =
      draft::evaluate_draft_head(r.weights, data, m, tc.feature_weight);
  std::printf(
      "trained %lld Adam steps in %.1f s: loss %.4f -> %.4f, top-1 agreement %.4f -> %.4f "
      "(%zu parameters)\n",
      static_cast<long long>(r.steps), host::seconds_since(t), r.before.loss, final_loss.loss,
      r.before.accuracy, final_loss.accuracy, r.weights.num_params());
  draft::DraftHeadFile f;
  f.weights = std::move(r.weights);
  f.n_vocab = m.hparams().n_vocab;
  f.target_digest = draft::target_digest(m);
  f.target_name = std::filesystem::path(loaded.path).filename().string();
  f.train = {static_cast<int64_t>(data.pairs.size()), o.epochs, o.seed, final_loss.loss,
             final_loss.accuracy};
  f.command = o.command_line;
  const std::string out =
      o.output_path.empty() ? draft::default_draft_head_path(o.model_path) : o.output_path;
  KEEL_TRY(draft::save_draft_head(f, out));
  std::printf("wrote %s (target digest %s)\n", out.c_str(),
              draft::digest_hex(f.target_digest).c_str());
  return Status();
}

}  // namespace

int run_train_draft(const TrainDraftOptions& opts) {
  auto setup = host::setup_compute(opts.compute);
  if (!setup.ok()) return report_error(setup.status());
  const Status s = train(opts, *setup);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
