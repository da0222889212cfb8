// What `keel train-predictor` and `keel eval predictor` share: the served model and the side model
// loaded once each (the same model object when they are the same file), the compute set-up, and
// the dataset samples built with a progress line.
//
// Thread safety: one owner.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model_loading.h"
#include "predictor/dataset.h"
#include "predictor/dataset_file.h"

namespace keel::cli {

struct PredictorModels {
  host::ComputeSetup setup{};
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<kernels::Ops> ops;
  LoadedModel served;
  LoadedModel side_owned;      // empty when the side model is the served model's file
  const model::Model* side{};  // the side model
  std::string side_path;       // its path (the served model's when not given)
  predictor::DatasetKey key(const predictor::DatasetSpec& spec) const;
  predictor::SpecialTokens special;
};

// Loads `model_path` and, when `side_path` is not empty or the same, the side model.
Result<PredictorModels> load_predictor_models(const ComputeOptions& compute,
                                              const std::string& model_path,
                                              const std::string& side_path);

// The samples of `indices` for `spec`, with a progress line on stderr.
Result<std::vector<predictor::LengthSample>> build_samples(PredictorModels& m,
                                                           const predictor::DatasetSpec& spec,
                                                           const std::vector<int32_t>& indices,
                                                           const std::string& label);

// The whole dataset of `spec`: read from the cache at `cache_path` when it holds this dataset,
// else built and (when cache_path is set) written there.
Result<std::vector<predictor::LengthSample>> dataset_samples(PredictorModels& m,
                                                             const predictor::DatasetSpec& spec,
                                                             const std::string& cache_path);

// File name of a path ("dir/x.gguf" → "x.gguf").
std::string file_name(const std::string& path);

}  // namespace keel::cli
