// load_predictor_models and build_samples (see predictor_models.h).
#include "predictor_models.h"

#include <cstdio>

#include "host/progress_reporter.h"

namespace keel::cli {

Result<PredictorModels> load_predictor_models(const ComputeOptions& compute,
                                              const std::string& model_path,
                                              const std::string& side_path) {
  if (model_path.empty()) return Status::invalid_argument("-m MODEL is required");
  PredictorModels m;
  KEEL_ASSIGN_OR_RETURN(m.setup, host::setup_compute(compute));
  m.pool = std::make_unique<ThreadPool>(m.setup.threads);
  m.ops = std::make_unique<kernels::Ops>(m.setup.isa, m.pool.get());
  KEEL_ASSIGN_OR_RETURN(m.served, load_model(model_path, compute, model::ModelOptions{}, *m.pool));
  m.side = m.served.model.get();
  m.side_path = side_path.empty() ? model_path : side_path;
  if (m.side_path != model_path) {
    KEEL_ASSIGN_OR_RETURN(m.side_owned,
                          load_model(m.side_path, compute, model::ModelOptions{}, *m.pool));
    m.side = m.side_owned.model.get();
  }
  m.special.bos = m.served.tokenizer->bos_id();
  m.special.eos = m.served.tokenizer->eos_id();
  if (m.special.bos < 0 || m.special.eos < 0) {
    return Status::invalid_argument("the served model's tokenizer has no BOS or EOS token");
  }
  return m;
}

Result<std::vector<predictor::LengthSample>> build_samples(PredictorModels& m,
                                                           const predictor::DatasetSpec& spec,
                                                           const std::vector<int32_t>& indices,
                                                           const std::string& label) {
  KEEL_ASSIGN_OR_RETURN(
      std::unique_ptr<predictor::DatasetBuilder> builder,
      predictor::DatasetBuilder::create(spec, *m.side, *m.served.model, m.special, *m.ops));
  host::ProgressReporter progress(label, "");
  auto out =
      builder->samples(indices, [&](size_t done, size_t total) { progress.update(done, total); });
  progress.finish();
  return out;
}

predictor::DatasetKey PredictorModels::key(const predictor::DatasetSpec& spec) const {
  return {spec, file_name(served.path), file_name(side_path)};
}

Result<std::vector<predictor::LengthSample>> dataset_samples(PredictorModels& m,
                                                             const predictor::DatasetSpec& spec,
                                                             const std::string& cache_path) {
  if (!cache_path.empty()) {
    Result<std::vector<predictor::LengthSample>> cached =
        predictor::load_samples(cache_path, m.key(spec));
    if (cached.ok()) {
      std::fprintf(stderr, "dataset: %zu samples from %s\n", cached->size(), cache_path.c_str());
      return cached;
    }
    std::fprintf(stderr, "dataset: %s; generating\n", cached.error().message().c_str());
  }
  std::vector<int32_t> all(static_cast<size_t>(spec.num_prompts));
  for (int32_t i = 0; i < spec.num_prompts; ++i) all[static_cast<size_t>(i)] = i;
  KEEL_ASSIGN_OR_RETURN(std::vector<predictor::LengthSample> samples,
                        build_samples(m, spec, all, "generating labels"));
  if (!cache_path.empty()) KEEL_TRY(predictor::save_samples(cache_path, m.key(spec), samples));
  return samples;
}

std::string file_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace keel::cli
