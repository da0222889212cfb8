// Python str semantics over UTF-8 std::string: code point indexing and slicing, strip with
// Python's whitespace set or given characters, split/rsplit, case changes (ASCII letters only:
// other characters pass through unchanged), title and capitalize. Invalid UTF-8 is treated one
// byte per code point, so no function can read out of bounds.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace keel::jinja {

// Byte offsets of each code point of `s`, followed by s.size().
std::vector<size_t> codepoint_offsets(std::string_view s);
size_t codepoint_count(std::string_view s);

// Python slice semantics: the indices selected by [start:stop:step] from a sequence of length n.
// InvalidArgument when step is 0.
Result<std::vector<size_t>> slice_indices(size_t n, std::optional<int64_t> start,
                                          std::optional<int64_t> stop, std::optional<int64_t> step);

// str.strip / lstrip / rstrip: `chars` absent strips Python whitespace.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                     bool right);

// str.split(sep, maxsplit) / str.rsplit: `sep` absent splits on runs of whitespace and drops
// empty parts; an empty `sep` is an InvalidArgument ("empty separator").
Result<std::vector<std::string>> py_split(std::string_view s, const std::optional<std::string>& sep,
                                          int64_t maxsplit, bool from_right);

std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);
std::string py_capitalize(std::string_view s);
bool py_isspace_char(uint32_t cp);

}  // namespace keel::jinja
