// `keel te` and `keel je`: the executor processes (src/executors) started from a spec, with what
// only the keel binary knows — keel serve's engine defaults under a TE's engine spec, the built-in
// models, the served model's name.
#include <spdlog/spdlog.h>

#include <string>

#include "builtin_models.h"
#include "cluster_commands.h"
#include "core/thread_pool.h"
#include "executors/je_process.h"
#include "executors/te_process.h"
#include "proc/stop_signals.h"

namespace keel::cli {
namespace {

// A TE's hooks: its engine options from `base` (its flags, or a spec's options) with the spec's
// engine part applied over them — a warm TE's bind replaces that part.
executors::TeProcessHooks te_hooks(const TeOptions& base) {
  executors::TeProcessHooks h;
  h.engine_defaults = base.engine;
  h.resolve_model = [](const std::string& model, ThreadPool& pool) {
    return resolve_model_path(model, pool);
  };
  h.model_name = [](const std::string& path) { return served_model_name("", path, path); };
  return h;
}

}  // namespace

int run_te(const TeOptions& base, const cluster::TeSpec& spec) {
  const sigset_t stop_signals = proc::block_stop_signals();
  spdlog::set_level(spdlog::level::info);
  const Status s = executors::run_task_executor(spec, te_hooks(base), stop_signals);
  return s.ok() ? 0 : report_error(s);
}

int run_je(cluster::JeSpec spec) {
  const sigset_t stop_signals = proc::block_stop_signals();
  spdlog::set_level(spdlog::level::info);
  spec.served_model_name =
      served_model_name(spec.served_model_name, spec.model_path, spec.model_path);
  const Status s = executors::run_job_executor(spec, stop_signals);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
