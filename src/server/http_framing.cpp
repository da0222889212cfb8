// check_framing and origin_form (see http_framing.h).
#include "server/http_framing.h"

#include <cctype>

namespace keel::server {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// The codings of all fields, in order; empty elements (", ,") are skipped as RFC 9110 §5.6.1
// allows.
std::vector<std::string_view> codings(const std::vector<std::string_view>& fields) {
  std::vector<std::string_view> out;
  for (std::string_view field : fields) {
    while (true) {
      const size_t comma = field.find(',');
      std::string_view item = trim(field.substr(0, comma));
      // Parameters (";q=1") belong to the coding; keep only its name.
      item = trim(item.substr(0, item.find(';')));
      if (!item.empty()) out.push_back(item);
      if (comma == std::string_view::npos) break;
      field.remove_prefix(comma + 1);
    }
  }
  return out;
}

}  // namespace

std::optional<FramingError> check_framing(int version,
                                          const std::vector<std::string_view>& transfer_encodings,
                                          bool has_content_length) {
  if (transfer_encodings.empty()) return std::nullopt;
  if (version < 11) {
    return FramingError{400, "Transfer-Encoding is not allowed in an HTTP/1.0 request."};
  }
  if (has_content_length) {
    return FramingError{400, "A request may not carry both Transfer-Encoding and Content-Length."};
  }
  const std::vector<std::string_view> list = codings(transfer_encodings);
  if (list.empty() || !iequals(list.back(), "chunked")) {
    return FramingError{400, "The final Transfer-Encoding of a request must be \"chunked\"."};
  }
  for (size_t i = 0; i + 1 < list.size(); ++i) {
    if (iequals(list[i], "chunked")) {
      return FramingError{400, "Transfer-Encoding \"chunked\" may be applied only once."};
    }
  }
  if (list.size() > 1) {
    return FramingError{501, "Transfer-Encoding \"" + std::string(list.front()) +
                                 "\" is not implemented; send \"chunked\" alone."};
  }
  return std::nullopt;
}

std::string origin_form(std::string_view target) {
  const size_t colon = target.find("://");
  if (colon == std::string_view::npos || target.empty() || target.front() == '/') {
    return std::string(target);
  }
  const std::string_view scheme = target.substr(0, colon);
  if (!iequals(scheme, "http") && !iequals(scheme, "https")) return std::string(target);
  const std::string_view rest = target.substr(colon + 3);
  const size_t path = rest.find_first_of("/?");
  if (path == std::string_view::npos) return "/";
  if (rest[path] == '?') return "/" + std::string(rest.substr(path));
  return std::string(rest.substr(path));
}

std::string percent_decode(std::string_view s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::optional<std::string> query_param(std::string_view target, std::string_view key) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == key) {
      return eq == std::string_view::npos ? std::string() : percent_decode(pair.substr(eq + 1));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

}  // namespace keel::server
