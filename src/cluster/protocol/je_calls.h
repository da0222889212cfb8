// call_jes: the cluster manager's call of one message to every job executor (JE) — remove_te
// with forget, after a TE was replaced or a drained one stopped (messages.h). Every JE is tried;
// a JE that does not know the TE (NotFound) is not an error (it may never have added it).
//
// Thread safety: a pure function of its arguments (it opens and closes its own links).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/status.h"
#include "net/link.h"

namespace keel::cluster {

// The first failure after trying every JE, or OK.
[[nodiscard]] Status call_jes(const std::vector<std::string>& je_addresses,
                              const net::Message& message, std::chrono::milliseconds timeout);

}  // namespace keel::cluster
