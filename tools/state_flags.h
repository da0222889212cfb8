// --state-dir and --no-state, shared by `keel serve` and `keel cluster up` (whose gateway is the
// same server): where the Batch API's files and batches and the stored responses are kept so they
// survive a restart.
//
// Thread safety: call from main() only.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "commands.h"

namespace keel::cli {

// --state-dir DIR, --no-state, --responses-dir DIR (ServerConfig::responses_dir).
void add_state_flags(CLI::App* cmd, ServeOptions* o);

// The server's state directory: --state-dir when given; "" (memory only) with --no-state; else
// state::default_state_dir(keel_cache_dir(), --port): <cache>/state/port-<port>, memory only on
// an ephemeral port (0).
std::string serve_state_dir(const ServeOptions& o);

}  // namespace keel::cli
