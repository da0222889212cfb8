// The request line and framing: target forms and escapes, and the framing rules the Beast parser
// leaves to us (RFC 9112), checked on the header before a body byte is read, so that a proxy in
// front of keel and keel never disagree on where a request ends (request smuggling):
//   - Transfer-Encoding is honoured only as exactly one `chunked` coding on HTTP/1.1. Any other
//     final coding (`gzip`, `xchunked`, ...) or a repeated `chunked` is a 400; `chunked` after
//     another coding (`gzip, chunked`) is a 501 (keel decodes no compression); Transfer-Encoding
//     on HTTP/1.0 is a 400; Transfer-Encoding together with Content-Length is a 400. Every one
//     of these answers closes the connection.
//   - Absolute-form targets (`POST http://host/v1/completions`) are accepted (§3.2.2): the
//     scheme and authority are dropped and routing sees the origin-form path.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace keel::server {

struct FramingError {
  int status = 400;  // 400 or 501
  std::string message;
};

// `transfer_encodings`: every Transfer-Encoding field value, in order (empty when absent).
// `version`: 10 or 11. nullopt when the framing is acceptable.
std::optional<FramingError> check_framing(int version,
                                          const std::vector<std::string_view>& transfer_encodings,
                                          bool has_content_length);

// The origin-form of a request target: "http://h:1/v1/x?q" → "/v1/x?q", "http://h" → "/";
// anything else unchanged.
std::string origin_form(std::string_view target);

// Decodes %XX escapes (model ids may contain '/', sent as %2F); other bytes, malformed escapes
// included, are kept as they are.
std::string percent_decode(std::string_view s);

// The decoded value of query parameter `key` of a request target ("/v1/x?limit=5&after=a"), ""
// when it has no value, nullopt when absent.
std::optional<std::string> query_param(std::string_view target, std::string_view key);

}  // namespace keel::server
