// run_job_executor: the `keel je` process — a cluster::JobExecutor configured from its spec
// (cluster/protocol/je_spec.h: router, PD heatmap, decode-length predictor, the LoRA adapters'
// prefix keys, fault hooks), registered in the membership under its own lease when the spec says
// etcd, and then following the TEs of its model there (one registered joins its fleet, one whose
// lease expires leaves it and its jobs are re-driven). It prints its ready line once it serves and
// runs until one of `stop_signals` (blocked by the caller) arrives; a lost lease is survived by
// registering again under a new session.
//
// Thread safety: runs on the caller's thread until a stop signal.
#pragma once

#include <signal.h>

#include "cluster/protocol/je_spec.h"
#include "core/result.h"

namespace keel::executors {

// `spec.served_model_name` must be set (the caller names a built-in model); `spec` as
// cluster::decode_je_spec accepts it.
Status run_job_executor(const cluster::JeSpec& spec, const sigset_t& stop_signals);

}  // namespace keel::executors
