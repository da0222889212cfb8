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
// What the spec leaves to the starting program comes through TeProcessHooks: the engine options
// under the spec's engine part (host/serve_options.h), and what a model name stands for (a
// built-in model, a download).
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
#include "executors/te_engine_setup.h"
#include "host/serve_options.h"

namespace keel::executors {

struct TeProcessHooks {
  // What the spec's engine part goes over (te_engine_setup.h): keel serve's defaults, or the
  // flags `keel te` was started with. Checked before anything starts (its errors are the spec's).
  host::ServeOptions engine_defaults;
  // The model file a name stands for; none: the name is the path.
  std::function<Result<std::string>(const std::string& model, ThreadPool& pool)> resolve_model;
  // The model id a TE serving `path` shows when its spec names none; none: the file's stem.
  std::function<std::string(const std::string& path)> model_name;
};

Status run_task_executor(const cluster::TeSpec& spec, const TeProcessHooks& hooks,
                         const sigset_t& stop_signals);

}  // namespace keel::executors
