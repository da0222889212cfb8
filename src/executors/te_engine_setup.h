// A task executor's engine from its spec: the spec's engine part (cluster/protocol/te_spec.h)
// applied over a base configuration (host/serve_options.h: keel serve's defaults, or the flags a
// `keel te` was started with), mapped onto the engine, the pipeline and semi-PD's controller. A
// warm TE makes it again once its bind replaced the spec's engine part.
//
// Thread safety: pure functions.
#pragma once

#include <chrono>
#include <optional>

#include "cluster/protocol/te_spec.h"
#include "core/result.h"
#include "engine/engine_config.h"
#include "engine/semi_pd_controller.h"
#include "host/pipeline_stage.h"
#include "host/serve_options.h"

namespace keel::executors {

// The engine a TE runs for a spec.
struct TeEngineSetup {
  engine::EngineConfig engine;
  host::PipelineOptions pipeline;
  host::ExpertParallelOptions expert_parallel;
  std::optional<engine::ControllerConfig> controller;  // semi-PD's dynamic split; none: fixed
  std::chrono::milliseconds controller_window{1000};
  std::chrono::milliseconds drain_timeout{30000};  // in-flight requests' time after SIGTERM
};

// `spec`'s engine over `base` on the cores this process may use. InvalidArgument from the
// semi-PD controller's checks (its errors are the spec's).
Result<TeEngineSetup> te_engine_setup(const host::ServeOptions& base, const cluster::TeSpec& spec);

}  // namespace keel::executors
