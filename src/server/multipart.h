// multipart/form-data bodies (RFC 7578), as POST /v1/files receives them: the boundary from the
// Content-Type header, then each part's Content-Disposition name and filename, its Content-Type
// and its bytes (binary-safe; CRLF line endings as RFC 2046 requires). Parts may appear in any
// order; a preamble before the first delimiter and an epilogue after the last are ignored.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/api_error.h"

namespace keel::server {

struct MultipartPart {
  std::string name;                     // Content-Disposition name (required)
  std::optional<std::string> filename;  // Content-Disposition filename, when given
  std::string content_type;             // the part's Content-Type, "" when absent
  std::string_view data;                // the part's bytes, a view into the body
};

// The boundary of a `multipart/form-data; boundary=...` Content-Type, or a 400 naming what is
// wrong (another media type, no boundary, a boundary over 70 characters).
ApiResult<std::string> multipart_boundary(std::string_view content_type);

// The parts of `body`; a 400 "Malformed multipart body: ..." when the delimiters or part headers
// are broken. The views point into `body`.
ApiResult<std::vector<MultipartPart>> parse_multipart(std::string_view body,
                                                      std::string_view boundary);

}  // namespace keel::server
