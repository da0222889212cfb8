// run_task_executor: the `keel te` process — a model, its engine and the TE-shell
// (cluster::TaskExecutor) from the TE's spec (cluster/protocol/te_spec.h): the KV services its role
// needs (a prefill TE's hand-off, a decode TE's transfer server, the peer tier's fetcher and
// server), the cache-event publisher, the weights service and receiver beside a model store, a
// progress-based /health port, and its own membership lease when the spec says etcd. A warm TE
// (spec.warm) starts without a model, prints a "warm" ready line with its bind port and serves
// what its bind names, with the bind's engine part over its own (te_warm.h). It prints its ready
// line (or answers its bind) once it serves, and drains on one of `stop_signals` (blocked by the
// caller).
//
// What the spec leaves to the starting program comes through TeProcessHooks: the engine's
// configuration under the spec's engine part (keel's own defaults — `keel serve`'s — live with its
// flags), and what a model name stands for (a built-in model, a download).
//
// Thread safety: runs on the caller's thread until a stop signal.
#pragma once

#include <signal.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "cluster/protocol/te_spec.h"
#include "core/result.h"
#include "core/thread_pool.h"
#include "engine/engine_config.h"
#include "engine/semi_pd_controller.h"
#include "host/pipeline_stage.h"

namespace keel::executors {

// The engine a TE runs for a spec.
struct TeEngineSetup {
  engine::EngineConfig engine;
  host::PipelineOptions pipeline;
  std::optional<engine::ControllerConfig> controller;  // semi-PD's dynamic split; none: fixed
  std::chrono::milliseconds controller_window{1000};
  std::chrono::milliseconds drain_timeout{30000};  // in-flight requests' time after SIGTERM
};

struct TeProcessHooks {
  // The engine of `spec` (required): made before anything starts (its errors are the spec's), and
  // again from a warm TE's spec once its bind replaced the engine part.
  std::function<Result<TeEngineSetup>(const cluster::TeSpec& spec)> engine;
  // The model file a name stands for; none: the name is the path.
  std::function<Result<std::string>(const std::string& model, ThreadPool& pool)> resolve_model;
  // The model id a TE serving `path` shows when its spec names none; none: the file's stem.
  std::function<std::string(const std::string& path)> model_name;
};

Status run_task_executor(const cluster::TeSpec& spec, const TeProcessHooks& hooks,
                         const sigset_t& stop_signals);

}  // namespace keel::executors
