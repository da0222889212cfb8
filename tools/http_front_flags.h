// The HTTP front end's flags, shared by `keel serve` and `keel cluster up` (whose gateway is the
// same server): body and connection limits, the header deadline, io threads and Batch API lines
// in flight; and their mapping onto server::ServerConfig. At start-up the soft descriptor limit
// is raised to the hard one and --max-connections is kept below it.
//
// Thread safety: call from main() only (the descriptor limit is process-wide).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>

#include "commands.h"
#include "server/server_config.h"

namespace keel::cli {

// --max-body-bytes, --max-inflight-body-bytes, --max-connections, --max-connections-per-client,
// --header-timeout, --io-threads, --batch-concurrency.
void add_http_front_flags(CLI::App* cmd, ServeOptions* o);

// Raises the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force.
int64_t raise_descriptor_limit();

// --max-connections kept below `descriptor_limit` (less the descriptors everything else needs).
[[nodiscard]] int32_t connection_cap(int32_t wanted, int64_t descriptor_limit);

// The flags of add_http_front_flags onto `c`.
void apply_http_front(const ServeOptions& o, int64_t descriptor_limit, server::ServerConfig* c);

}  // namespace keel::cli
