// Url: an absolute http or https URL split into what an HTTP client (http_client.h) needs. Only
// what keel's clients use is accepted: scheme http/https, a host (name, IPv4, or [IPv6]), an
// optional port, and a path with an optional query; no user info, no fragment is kept. Thread
// safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace keel::net {

struct Url {
  bool https = false;
  std::string host;                       // without brackets for IPv6
  uint16_t port = 0;                      // the scheme's default when the URL names none
  std::string target;                     // path and query, starting with '/'
  [[nodiscard]] std::string str() const;  // scheme://host[:port]target
};

// InvalidArgument naming what is wrong (scheme, host, port, characters).
Result<Url> parse_url(std::string_view text);
// `location` (absolute, or a path relative to `base`'s host) resolved against `base`.
Result<Url> resolve_location(const Url& base, std::string_view location);

}  // namespace keel::net
