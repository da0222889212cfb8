// Whether a process could listen on host:port now: `keel cluster up` asks before it starts any
// child, so a gateway port in use is a one-line error at once, not after every TE and JE has
// started (minutes with a large model). A probe, not a reservation: the port is free again when
// it returns (the caller binds it moments later).
// Thread safety: free functions.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace keel::net {

// Ok when a TCP socket can bind host:port and listen (SO_REUSEADDR, as the servers bind); port 0
// is always Ok. Otherwise Unavailable "cannot listen on HOST:PORT: <why>" (in use, a host that
// does not resolve or is not this machine's).
[[nodiscard]] Status probe_listen(const std::string& host, uint16_t port);

}  // namespace keel::net
