// The id a server goes by among the gateways that share a responses directory
// (ServerConfig::responses_dir; responses_store.h, "Shared"): the owner stamped on the responses
// it creates, so that after its restart it knows which unfinished ones were its own runs (they
// become failed) and leaves another gateway's running ones alone. Kept as the record
// "server"/"identity" of the server's own state directory, so a restart on the same directory is
// the same owner; a server without one gets a new id every run (its runs interrupted by a restart
// then stay queued or in progress in the shared directory).
//
// Thread safety: call once, at start-up.
#pragma once

#include <string>

#include "core/result.h"
#include "state/state_store.h"

namespace keel::server {

// "gw-<16 hex digits>": read from `own_state` (when not null), or made and written there.
Result<std::string> responses_owner_id(state::StateStore* own_state);

}  // namespace keel::server
