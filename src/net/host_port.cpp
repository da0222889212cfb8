// parse_host_port (see host_port.h).
#include "net/host_port.h"

#include <charconv>

namespace keel::net {

Result<HostPort> parse_host_port(std::string_view address) {
  const auto bad = [&] {
    return Status::invalid_argument("expected host:port, got \"" + std::string(address) + "\"");
  };
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == address.size()) return bad();
  const std::string_view digits = address.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (ec != std::errc() || end != digits.data() + digits.size() || port == 0 || port > 65535) {
    return bad();
  }
  return HostPort{std::string(address.substr(0, colon)), static_cast<uint16_t>(port)};
}

}  // namespace keel::net
