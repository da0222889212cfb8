// "host:port" addresses as the cluster passes them around (control links, KV transfer and fetch
// services): split at the last ':' — so "[::1]"-free IPv6 literals are not supported — with a
// decimal port of 1 to 65535.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace keel::net {

struct HostPort {
  std::string host;
  uint16_t port = 0;
};

// InvalidArgument naming the address when it has no host, no port, or a port that is not a
// number in [1, 65535].
Result<HostPort> parse_host_port(std::string_view address);

}  // namespace keel::net
