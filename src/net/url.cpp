// parse_url / resolve_location (see url.h).
#include "net/url.h"

#include <charconv>

namespace keel::net {
namespace {

Status bad(std::string_view text, std::string_view why) {
  return Status::invalid_argument("bad URL \"" + std::string(text) + "\": " + std::string(why));
}

bool printable_ascii(std::string_view s) {
  for (const char c : s) {
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

}  // namespace

std::string Url::str() const {
  std::string out = https ? "https://" : "http://";
  out += host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port != (https ? 443 : 80)) out += ":" + std::to_string(port);
  return out + target;
}

Result<Url> parse_url(std::string_view text) {
  Url url;
  std::string_view rest;
  if (text.starts_with("https://")) {
    url.https = true;
    rest = text.substr(8);
  } else if (text.starts_with("http://")) {
    rest = text.substr(7);
  } else {
    return bad(text, "the scheme must be http or https");
  }
  if (!printable_ascii(text)) return bad(text, "spaces or non-ASCII characters");
  const size_t slash = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "/" : rest.substr(slash);
  if (const size_t hash = path.find('#'); hash != std::string_view::npos) {
    path = path.substr(0, hash);
  }
  if (authority.find('@') != std::string_view::npos) return bad(text, "user info is not accepted");
  std::string_view port_text;
  if (authority.starts_with("[")) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad(text, "unclosed [IPv6] host");
    url.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (!after.starts_with(":")) return bad(text, "junk after the [IPv6] host");
      port_text = after.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (url.host.empty()) return bad(text, "no host");
  url.port = url.https ? 443 : 80;
  if (!port_text.empty()) {
    unsigned value = 0;
    const auto [end, ec] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || value == 0 ||
        value > 65535) {
      return bad(text, "bad port");
    }
    url.port = static_cast<uint16_t>(value);
  }
  url.target = path.starts_with("/") ? std::string(path) : "/" + std::string(path);
  return url;
}

Result<Url> resolve_location(const Url& base, std::string_view location) {
  if (location.starts_with("http://") || location.starts_with("https://")) {
    return parse_url(location);
  }
  if (!location.starts_with("/") || location.starts_with("//")) {
    return Status::invalid_argument("unsupported redirect location \"" + std::string(location) +
                                    "\"");
  }
  Url out = base;
  out.target = std::string(location);
  if (!printable_ascii(out.target)) return bad(location, "spaces or non-ASCII characters");
  return out;
}

}  // namespace keel::net
