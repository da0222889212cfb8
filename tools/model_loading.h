// The CLI's side of loading a model (host/model_loading.h does the loading): the built-in default
// model when no path is given, and a progress bar on a terminal (progress lines otherwise) while
// the weights are read. Shared by `keel run`, `keel bench` and the eval commands.
#pragma once

#include <string>

#include "commands.h"
#include "core/result.h"
#include "core/thread_pool.h"
#include "host/model_loading.h"

namespace keel::cli {

using host::LoadedModel;

// `path` "" → the built-in default model (created on first use with `pool`). The progress bar
// shows with compute.verbose.
Result<LoadedModel> load_model(const std::string& path, const ComputeOptions& compute,
                               const model::ModelOptions& options, ThreadPool& pool);

}  // namespace keel::cli
