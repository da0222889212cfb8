// A TE's engine from its spec; see te_engine_setup.h.
#include "executors/te_engine_setup.h"

#include "engine/semi_pd_split.h"

namespace keel::executors {

Result<TeEngineSetup> te_engine_setup(const host::ServeOptions& base, const cluster::TeSpec& spec) {
  host::ServeOptions o = base;
  host::apply_engine_spec(spec.engine, &o);
  TeEngineSetup s;
  s.engine = host::serve_engine_config(o);
  s.pipeline = host::serve_pipeline_options(o);
  s.expert_parallel = host::serve_expert_parallel_options(o);
  KEEL_ASSIGN_OR_RETURN(
      engine::ControllerConfig c,
      host::semi_pd_controller_config(o, static_cast<int32_t>(engine::allowed_cores().size())));
  if (o.semi_pd_dynamic) s.controller = c;
  s.controller_window = std::chrono::milliseconds(o.semi_pd_window_ms);
  s.drain_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.drain_timeout_s * 1000));
  return s;
}

}  // namespace keel::executors
