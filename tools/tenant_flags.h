// --api-keys-file and --quota-dir, shared by `keel serve`, `keel cluster up` and
// `keel cluster gateway` (every one of them is the same server in front): the tenants' keys,
// weights and quotas, and where the gateways of a cluster share the quota windows
// (docs/tenants.md).
//
// Thread safety: call from main() only.
#pragma once

#include <CLI/CLI.hpp>

#include "commands.h"

namespace keel::cli {

// --api-keys-file FILE (ServerConfig::api_keys_file), --quota-dir DIR (ServerConfig::quota_dir).
void add_tenant_flags(CLI::App* cmd, ServeOptions* o);

}  // namespace keel::cli
