// multipart/form-data parsing (see multipart.h).
#include "server/multipart.h"

#include <fmt/format.h>

#include <cctype>

namespace keel::server {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim_blanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

ApiError malformed(std::string_view what) {
  return ApiError::bad_request(fmt::format("Malformed multipart body: {}", what));
}

// The value of parameter `key` in a header value like `form-data; name="file"; filename="a"`
// (quoted or token), or nullopt when absent.
std::optional<std::string> header_param(std::string_view value, std::string_view key) {
  constexpr size_t kNpos = std::string_view::npos;
  auto skip_space = [&value](size_t i) {
    while (i < value.size() && (value[i] == ' ' || value[i] == '\t')) ++i;
    return i;
  };
  size_t i = value.find(';');
  while (i != kNpos) {
    i = skip_space(i + 1);
    const size_t eq = value.find('=', i);
    if (eq == kNpos) return std::nullopt;
    const std::string name = lower(trim_blanks(value.substr(i, eq - i)));
    i = skip_space(eq + 1);
    std::string parsed;
    if (i < value.size() && value[i] == '"') {
      for (++i; i < value.size() && value[i] != '"'; ++i) {
        if (value[i] == '\\' && i + 1 < value.size()) ++i;
        parsed += value[i];
      }
      i = value.find(';', i);
    } else {
      const size_t end = value.find(';', i);
      parsed = std::string(trim_blanks(value.substr(i, end == kNpos ? kNpos : end - i)));
      i = end;
    }
    if (name == key) return parsed;
  }
  return std::nullopt;
}

// Parses the header block of one part (lines separated by CRLF) into `part`.
std::optional<ApiError> parse_part_headers(std::string_view block, MultipartPart* part) {
  bool has_disposition = false;
  while (!block.empty()) {
    const size_t eol = block.find("\r\n");
    const std::string_view line = block.substr(0, eol);
    block.remove_prefix(eol == std::string_view::npos ? block.size() : eol + 2);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return malformed("a part header has no ':'");
    const std::string name = lower(trim_blanks(line.substr(0, colon)));
    const std::string_view value = trim_blanks(line.substr(colon + 1));
    if (name == "content-disposition") {
      if (lower(value.substr(0, value.find(';'))) != "form-data") {
        return malformed("a part's Content-Disposition is not form-data");
      }
      std::optional<std::string> field_name = header_param(value, "name");
      if (!field_name) return malformed("a part's Content-Disposition has no name");
      part->name = std::move(*field_name);
      part->filename = header_param(value, "filename");
      has_disposition = true;
    } else if (name == "content-type") {
      part->content_type = std::string(value);
    }
  }
  if (!has_disposition) return malformed("a part has no Content-Disposition header");
  return std::nullopt;
}

}  // namespace

ApiResult<std::string> multipart_boundary(std::string_view content_type) {
  const std::string media = lower(trim_blanks(content_type.substr(0, content_type.find(';'))));
  if (media != "multipart/form-data") {
    return ApiError::bad_request(
        fmt::format("Expected a multipart/form-data body, got Content-Type \"{}\"",
                    content_type.substr(0, 100)));
  }
  std::optional<std::string> boundary = header_param(content_type, "boundary");
  if (!boundary || boundary->empty() || boundary->size() > 70) {
    return ApiError::bad_request(
        "The multipart/form-data Content-Type needs a boundary of 1 to 70 characters");
  }
  return *boundary;
}

ApiResult<std::vector<MultipartPart>> parse_multipart(std::string_view body,
                                                      std::string_view boundary) {
  const std::string delimiter = "--" + std::string(boundary);
  const std::string inner = "\r\n" + delimiter;
  // The first delimiter starts the body or follows a preamble line.
  size_t pos = body.starts_with(delimiter) ? 0 : body.find(inner);
  if (pos == std::string_view::npos) return malformed("no boundary delimiter found");
  if (pos != 0) pos += 2;
  std::vector<MultipartPart> parts;
  for (;;) {
    pos += delimiter.size();
    if (body.substr(pos, 2) == "--") break;  // the close delimiter
    // Transport padding (spaces/tabs) may follow a delimiter before its CRLF.
    while (pos < body.size() && (body[pos] == ' ' || body[pos] == '\t')) ++pos;
    if (body.substr(pos, 2) != "\r\n") return malformed("a delimiter is not followed by CRLF");
    pos += 2;
    const size_t headers_end = body.find("\r\n\r\n", pos);
    // A part without headers starts with the blank line at once.
    const bool no_headers = body.substr(pos, 2) == "\r\n";
    if (!no_headers && headers_end == std::string_view::npos) {
      return malformed("a part's headers do not end");
    }
    MultipartPart part;
    const std::string_view block =
        no_headers ? std::string_view() : body.substr(pos, headers_end - pos);
    if (auto e = parse_part_headers(block, &part)) return *e;
    const size_t data_start = no_headers ? pos + 2 : headers_end + 4;
    const size_t data_end = body.find(inner, data_start);
    if (data_end == std::string_view::npos) return malformed("the closing boundary is missing");
    part.data = body.substr(data_start, data_end - data_start);
    parts.push_back(std::move(part));
    pos = data_end + 2;
  }
  return parts;
}

}  // namespace keel::server
