// `keel eval predictor`: regenerates the held-out split of a predictor file's dataset (the spec
// is in the file; same seeds, same samples), predicts each prompt through
// LengthPredictor::predict (side-model forward pass + head, as a router would call it) and
// reports accuracy against the majority-bucket baseline (the training split's most frequent
// bucket, stored in the file), the confusion matrix (rows: actual bucket, columns: predicted),
// mean absolute error in tokens and the mean wall and CPU time of one predict() call (µs, one
// thread).
// Output: text, or one JSON object (--json).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "predictor/length_predictor.h"
#include "predictor/metrics.h"
#include "predictor_models.h"

namespace keel::cli {
namespace {

using Clock = std::chrono::steady_clock;

// CPU time of the calling thread (µs): the cost of a prediction even on a shared, busy machine.
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

void print_text(const predictor::PredictorFile& f, const predictor::LengthMetrics& m, double us,
                double cpu_us) {
  const predictor::LengthBuckets& b = f.head.buckets;
  std::printf("held-out prompts: %lld (1 in %d of %d)\n", static_cast<long long>(m.count),
              f.dataset.heldout_every, f.dataset.num_prompts);
  std::printf("buckets: %d of %d tokens (cap %d)\n", b.num_buckets(), b.width, b.max_tokens);
  std::printf("accuracy: %.3f  (majority bucket %d: %.3f)\n", m.accuracy, f.majority_bucket,
              m.baseline_accuracy);
  std::printf("MAE: %.1f tokens  (majority: %.1f)\n", m.mae_tokens, m.baseline_mae_tokens);
  std::printf("cost: %.1f us per prediction (wall), %.1f us CPU\n", us, cpu_us);
  std::printf("confusion (rows: actual bucket, columns: predicted bucket)\n      ");
  for (int32_t c = 0; c < b.num_buckets(); ++c) std::printf("%5d", c);
  std::printf("\n");
  for (int32_t r = 0; r < b.num_buckets(); ++r) {
    std::printf("%5d ", r);
    for (int64_t v : m.confusion[static_cast<size_t>(r)]) std::printf("%5lld", (long long)v);
    std::printf("\n");
  }
}

Status evaluate(const EvalPredictorOptions& o) {
  if (o.predictor_path.empty()) return Status::invalid_argument("--predictor FILE is required");
  KEEL_ASSIGN_OR_RETURN(predictor::PredictorFile file, predictor::load_predictor(o.predictor_path));
  KEEL_ASSIGN_OR_RETURN(PredictorModels m,
                        load_predictor_models(o.compute, o.model_path, o.predictor_model_path));
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<predictor::LengthPredictor> p,
                        predictor::LengthPredictor::create(file, *m.side, m.setup.isa));
  std::vector<int32_t> indices = predictor::split_indices(file.dataset, /*held_out=*/true);
  if (o.limit > 0 && static_cast<size_t>(o.limit) < indices.size()) indices.resize(o.limit);
  std::vector<predictor::LengthSample> samples;
  Result<std::vector<predictor::LengthSample>> cached =
      o.dataset_path.empty() ? Result<std::vector<predictor::LengthSample>>(Status::not_found(""))
                             : predictor::load_samples(o.dataset_path, m.key(file.dataset));
  if (cached.ok()) {
    for (int32_t i : indices) samples.push_back((*cached)[static_cast<size_t>(i)]);
  } else {
    if (!o.dataset_path.empty()) std::fprintf(stderr, "%s\n", cached.error().message().c_str());
    KEEL_ASSIGN_OR_RETURN(samples,
                          build_samples(m, file.dataset, indices, "generating held-out labels"));
  }
  std::vector<int32_t> actual, predicted;
  double total_us = 0, total_cpu_us = 0;
  for (const auto& s : samples) {
    const auto t = Clock::now();
    const double cpu = thread_cpu_us();
    KEEL_ASSIGN_OR_RETURN(predictor::LengthPrediction pr, p->predict(s.prompt));
    total_cpu_us += thread_cpu_us() - cpu;
    total_us += std::chrono::duration<double, std::micro>(Clock::now() - t).count();
    actual.push_back(s.generated);
    predicted.push_back(pr.bucket);
  }
  const predictor::LengthMetrics mt =
      predictor::length_metrics(file.head.buckets, actual, predicted, file.majority_bucket);
  const double n = std::max<double>(1.0, static_cast<double>(samples.size()));
  const double us = total_us / n, cpu_us = total_cpu_us / n;
  if (!o.json) {
    print_text(file, mt, us, cpu_us);
    return Status();
  }
  const nlohmann::json j = {{"predictor", o.predictor_path},
                            {"served_model", file.served_model},
                            {"feature_model", file.feature_model},
                            {"heldout", mt.count},
                            {"bucket_width", file.head.buckets.width},
                            {"max_tokens", file.head.buckets.max_tokens},
                            {"accuracy", mt.accuracy},
                            {"majority_bucket", file.majority_bucket},
                            {"baseline_accuracy", mt.baseline_accuracy},
                            {"mae_tokens", mt.mae_tokens},
                            {"baseline_mae_tokens", mt.baseline_mae_tokens},
                            {"us_per_prediction", us},
                            {"cpu_us_per_prediction", cpu_us},
                            {"confusion", mt.confusion}};
  std::printf("%s\n", j.dump().c_str());
  return Status();
}

}  // namespace

int run_eval_predictor(const EvalPredictorOptions& opts) {
  const Status s = evaluate(opts);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
