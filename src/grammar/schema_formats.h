// String `format`s as grammar, each generating only strings that ajv-formats accepts in its
// "full" mode (tests/grammar check samples with it):
//   date       RFC 3339 full-date, month 01-12 and the month's days (29 February in leap years)
//   time       RFC 3339 full-time: hh:mm:ss, optional 1-6 fraction digits, Z or ±hh:mm
//   date-time  date "T" time
//   duration   ISO 8601 PnYnMnDTnHnMnS (components in order, at least one) or PnW; n: 1-4 digits
//   uuid       8-4-4-4-12 lowercase hexadecimal
//   email      1-4 dot-atoms of 1-15 [A-Za-z0-9_+-] @ a domain: 1-3 labels of 1-29 letters and
//              digits with single inner hyphens, then a top-level domain of 2-6 letters (zod's
//              and pydantic's own email checks accept these too)
//   hostname   1-4 labels of 1-62 letters, digits and inner hyphens (≤ 251 characters)
//   ipv4       four 0-255 octets without leading zeros
//   ipv6       RFC 4291 text, "::" compression included (no embedded IPv4)
//   uri        http(s)://domain[:port][/path][?query][#fragment]: the domain as for email, port
//              1-9999, RFC 3986 characters but '@' and %-escapes (pydantic 1's HttpUrl, which
//              wants a top-level domain and reads a later '@' as userinfo, and zod's url()
//              accept these too); uri-reference the same
//   byte       base64 (up to 256 characters, padded)
//   iso-time / iso-date-time: as time / date-time (their time zone is optional)
// Other formats ajv-formats knows (url, uri-template, regex, json-pointer, idn-*, iri, ...) are
// refused; unknown ones, and password / binary / the numeric int32..double, are annotations for
// strings and ignored.
// Every format grammar is bounded, and its length range exact.
// Thread safety: pure functions writing into the caller's RuleWriter.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "grammar/rule_writer.h"

namespace keel::grammar {

// The shortest and longest strings (in characters) of a format grammar.
struct LengthRange {
  uint32_t min = 0;
  std::optional<uint32_t> max;  // nullopt: unbounded
};

struct FormatGrammar {
  std::string root;    // the expression of a string's contents (between its quotes)
  std::string rules;   // the rules it needs ("name ::= body" lines, named with the prefix)
  LengthRange length;  // exact (the grammars are ASCII, without escapes)
  // A complete grammar of the same strings, start rule `root`.
  [[nodiscard]] std::string standalone() const { return "root ::= " + root + "\n" + rules; }
};

// `format`'s grammar, rules named `prefix`...; nullopt when the format is an annotation.
// With max_chars (a maxLength the format does not imply), every bounded repetition {m,n} of the
// grammar is cut to m + ⌊(n − m)·f⌋ for the largest f (in thousandths) whose longest string fits:
// still the format, only shorter. Refused formats, and a max_chars no variant fits, are errors.
Result<std::optional<FormatGrammar>> format_grammar(std::string_view format,
                                                    std::string_view prefix,
                                                    std::optional<uint32_t> max_chars);

}  // namespace keel::grammar
