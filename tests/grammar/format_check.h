// Test-side checks of JSON Schema string formats, written from the RFCs (3339, 4122, 4291, 3986,
// 1123, 5321) independently of the grammars in grammar/schema_formats.cpp: date (real calendar
// days, leap years), time (offset required, as ajv-formats' full mode), date-time, duration,
// uuid, email, hostname, ipv4, ipv6, uri, byte.
#pragma once

#include <string>

namespace keel::grammar::testing {

// True when `s` is valid in `format`; unknown formats are true (annotations).
bool format_valid(const std::string& format, const std::string& s);

}  // namespace keel::grammar::testing
