// The semi-PD engine's flags, shared by `keel serve`, `keel te` and `keel cluster up` (which
// passes them on to its semi-PD TEs in their spec, cluster/protocol/te_spec.h): --semi-pd-split,
// and
// --semi-pd-dynamic with the SLO-aware controller's settings (engine/semi_pd_controller.h). --mode
// stays with each command (its help differs). The values land in ServeOptions.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "commands.h"

namespace keel::cli {

// Registers --semi-pd-split, --semi-pd-dynamic, --semi-pd-ttft-slo-ms, --semi-pd-tpot-slo-ms,
// --semi-pd-window-ms, --semi-pd-step, --semi-pd-max-step, --semi-pd-percentile and
// --semi-pd-max-cores on `cmd`, writing into `o`.
void add_semi_pd_flags(CLI::App* cmd, ServeOptions* o);

}  // namespace keel::cli
