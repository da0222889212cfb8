// `keel train-predictor`: builds the dataset (side-model-written prompts, the served model's
// generation lengths; predictor/dataset.h), extracts the side model's features of every prompt,
// trains the head on the training split (predictor/trainer.h), reports the held-out split against
// the majority-bucket baseline and writes the predictor file (predictor/predictor_file.h) with
// the command line that produced it.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "predictor/features.h"
#include "predictor/length_predictor.h"
#include "predictor/metrics.h"
#include "predictor/trainer.h"
#include "predictor_models.h"

namespace keel::cli {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

predictor::DatasetSpec dataset_spec(const TrainPredictorOptions& o) {
  predictor::DatasetSpec d;
  d.num_prompts = o.prompts;
  d.min_prompt_tokens = o.min_prompt_tokens;
  d.max_prompt_tokens = o.max_prompt_tokens;
  d.max_new_tokens = o.max_new_tokens;
  d.temperature = o.temperature;
  d.top_k = o.top_k;
  d.seed = o.seed;
  return d;
}

std::string default_output(const std::string& side_path) {
  std::string stem = file_name(side_path);
  if (stem.size() > 5 && stem.ends_with(".gguf")) stem.resize(stem.size() - 5);
  return stem + "-length.gguf";
}

void print_histogram(const predictor::LengthBuckets& b,
                     const std::vector<predictor::LengthSample>& samples) {
  std::vector<int64_t> counts(static_cast<size_t>(b.num_buckets()), 0);
  for (const auto& s : samples) ++counts[static_cast<size_t>(b.bucket_of(s.generated))];
  std::printf("labels per bucket:");
  for (size_t i = 0; i < counts.size(); ++i) {
    std::printf(" [%d,%d):%lld", b.lower(static_cast<int32_t>(i)), b.upper(static_cast<int32_t>(i)),
                static_cast<long long>(counts[i]));
  }
  std::printf("\n");
}

Status train(const TrainPredictorOptions& o) {
  const predictor::DatasetSpec spec = dataset_spec(o);
  const predictor::LengthBuckets buckets{o.bucket_width, o.max_new_tokens};
  KEEL_TRY(spec.validate());
  KEEL_TRY(buckets.validate());
  predictor::TrainConfig tc;
  tc.hidden = o.hidden;
  tc.steps = o.steps;
  tc.learning_rate = o.learning_rate;
  tc.weight_decay = o.weight_decay;
  tc.seed = o.seed;
  KEEL_TRY(tc.validate());
  KEEL_ASSIGN_OR_RETURN(PredictorModels m,
                        load_predictor_models(o.compute, o.model_path, o.predictor_model_path));

  auto t = Clock::now();
  KEEL_ASSIGN_OR_RETURN(std::vector<predictor::LengthSample> samples,
                        dataset_samples(m, spec, o.dataset_path));
  const double gen_s = seconds_since(t);
  print_histogram(buckets, samples);

  t = Clock::now();
  const predictor::FeatureExtractor fx(*m.side, m.setup.isa);
  std::vector<std::vector<float>> train_x, test_x;
  std::vector<int32_t> train_y, train_tokens, test_tokens;
  for (const auto& s : samples) {
    KEEL_ASSIGN_OR_RETURN(std::vector<float> f, fx.extract(s.prompt));
    if (spec.is_heldout(s.index)) {
      test_x.push_back(std::move(f));
      test_tokens.push_back(s.generated);
    } else {
      train_x.push_back(std::move(f));
      train_y.push_back(buckets.bucket_of(s.generated));
      train_tokens.push_back(s.generated);
    }
  }
  const double feat_s = seconds_since(t);

  t = Clock::now();
  KEEL_ASSIGN_OR_RETURN(predictor::TrainResult r,
                        predictor::train_head(train_x, train_y, buckets, tc));
  const double train_s = seconds_since(t);

  predictor::PredictorFile file;
  file.head = std::move(r.head);
  file.dataset = spec;
  file.majority_bucket = predictor::majority_bucket(buckets, train_tokens);
  file.feature_model = file_name(m.side_path);
  file.feature_n_embd = m.side->hparams().n_embd;
  file.feature_n_vocab = m.side->hparams().n_vocab;
  file.served_model = file_name(o.model_path);
  file.command = o.command_line;
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<predictor::LengthPredictor> p,
                        predictor::LengthPredictor::create(file, *m.side, m.setup.isa));
  auto evaluate = [&](const std::vector<std::vector<float>>& x, const std::vector<int32_t>& y) {
    std::vector<int32_t> pred;
    for (const auto& f : x) pred.push_back(p->predict_features(f).bucket);
    return predictor::length_metrics(buckets, y, pred, file.majority_bucket);
  };
  const predictor::LengthMetrics tr = evaluate(train_x, train_tokens);
  const predictor::LengthMetrics te = evaluate(test_x, test_tokens);
  std::printf("loss %.4f -> %.4f over %d steps\n", r.loss.front(), r.loss.back(), tc.steps);
  std::printf("train    (%lld): accuracy %.3f (majority %.3f), MAE %.1f tokens (majority %.1f)\n",
              static_cast<long long>(tr.count), tr.accuracy, tr.baseline_accuracy, tr.mae_tokens,
              tr.baseline_mae_tokens);
  std::printf("held-out (%lld): accuracy %.3f (majority %.3f), MAE %.1f tokens (majority %.1f)\n",
              static_cast<long long>(te.count), te.accuracy, te.baseline_accuracy, te.mae_tokens,
              te.baseline_mae_tokens);
  std::printf("time: labels %.1f s, features %.1f s, training %.1f s\n", gen_s, feat_s, train_s);
  const std::string out = o.output_path.empty() ? default_output(m.side_path) : o.output_path;
  KEEL_TRY(predictor::save_predictor(file, out));
  std::printf("wrote %s\n", out.c_str());
  return Status();
}

}  // namespace

int run_train_predictor(const TrainPredictorOptions& opts) {
  const Status s = train(opts);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
