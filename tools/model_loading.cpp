// load_model: the default-model fallback and a progress bar around host::load_model.
#include "model_loading.h"

#include "builtin_models.h"
#include "host/progress_reporter.h"

namespace keel::cli {

Result<LoadedModel> load_model(const std::string& path, const ComputeOptions& compute,
                               const model::ModelOptions& options, ThreadPool& pool) {
  KEEL_ASSIGN_OR_RETURN(const std::string resolved, resolve_model_path(path, pool));
  host::ProgressReporter progress("loading " + resolved, "B", compute.verbose);
  KEEL_ASSIGN_OR_RETURN(
      LoadedModel out,
      host::load_model(resolved, compute, options, [&progress](uint64_t done, uint64_t total) {
        progress.update(done, total);
      }));
  progress.finish();
  return out;
}

}  // namespace keel::cli
