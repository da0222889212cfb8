// `keel te` and `keel je`: the executor processes (src/executors) started from a spec, with what
// only the keel binary knows — keel serve's engine defaults under a TE's engine spec, the built-in
// models, the served model's name.
#include <spdlog/spdlog.h>

#include <chrono>
#include <string>

#include "builtin_models.h"
#include "cluster_commands.h"
#include "core/thread_pool.h"
#include "engine/semi_pd_split.h"
#include "executor_spec_flags.h"
#include "executors/je_process.h"
#include "executors/te_process.h"
#include "stop_signals.h"

namespace keel::cli {
namespace {

// A TE's hooks: its engine from `base` (its flags, or a spec's options) with the spec's engine
// part applied over them — a warm TE's bind replaces that part.
executors::TeProcessHooks te_hooks(TeOptions base) {
  executors::TeProcessHooks h;
  h.engine = [base](const cluster::TeSpec& spec) -> Result<executors::TeEngineSetup> {
    TeOptions t = base;
    apply_engine_spec(spec.engine, &t);
    const ServeOptions& o = t.engine;
    executors::TeEngineSetup s;
    s.engine = serve_engine_config(o);
    s.pipeline = serve_pipeline_options(o);
    KEEL_ASSIGN_OR_RETURN(
        engine::ControllerConfig c,
        semi_pd_controller_config(o, static_cast<int32_t>(engine::allowed_cores().size())));
    if (o.semi_pd_dynamic) s.controller = c;
    s.controller_window = std::chrono::milliseconds(o.semi_pd_window_ms);
    s.drain_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.drain_timeout_s * 1000));
    return s;
  };
  h.resolve_model = [](const std::string& model, ThreadPool& pool) {
    return resolve_model_path(model, pool);
  };
  h.model_name = [](const std::string& path) { return served_model_name("", path, path); };
  return h;
}

}  // namespace

int run_te(const TeOptions& base, const cluster::TeSpec& spec) {
  const sigset_t stop_signals = block_stop_signals();
  spdlog::set_level(spdlog::level::info);
  const Status s = executors::run_task_executor(spec, te_hooks(base), stop_signals);
  return s.ok() ? 0 : report_error(s);
}

int run_je(cluster::JeSpec spec) {
  const sigset_t stop_signals = block_stop_signals();
  spdlog::set_level(spdlog::level::info);
  spec.served_model_name =
      served_model_name(spec.served_model_name, spec.model_path, spec.model_path);
  const Status s = executors::run_job_executor(spec, stop_signals);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
