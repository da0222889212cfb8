// Format grammars (schema_formats.h): GBNF templates whose rule names start with '@', renamed
// per compilation.
#include "grammar/schema_formats.h"

#include <fmt/format.h>

#include <array>
#include <set>

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_bounds.h"

namespace keel::grammar {
namespace {

constexpr std::string_view kDate = R"(@date ::= [0-9]{4} "-" @md | @leap "-02-29"
@md ::= ("0" [13578] | "1" [02]) "-" @d31 | ("0" [469] | "11") "-" @d30 | "02-" @d28
@d28 ::= "0" [1-9] | "1" [0-9] | "2" [0-8]
@d30 ::= @d28 | "29" | "30"
@d31 ::= @d30 | "31"
@leap ::= [0-9] [0-9] ("0" [48] | [2468] [048] | [13579] [26]) | ("0" [048] | [2468] [048] | [13579] [26]) "00"
)";

constexpr std::string_view kTime = R"(@time ::= @hh ":" @mm ":" @mm ("." [0-9]{1,6})? @offset
@hh ::= [01] [0-9] | "2" [0-3]
@mm ::= [0-5] [0-9]
@offset ::= "Z" | [+-] @hh ":" @mm
)";

constexpr std::string_view kDuration = R"(@duration ::= "P" (@ymd @hms? | @hms | @n "W")
@ymd ::= @n "Y" (@n "M")? (@n "D")? | @n "M" (@n "D")? | @n "D"
@hms ::= "T" (@n "H" (@n "M")? (@n "S")? | @n "M" (@n "S")? | @n "S")
@n ::= [0-9]{1,4}
)";

constexpr std::string_view kHostname = R"(@hostname ::= @label ("." @label){0,3}
@label ::= [a-zA-Z0-9] ([a-zA-Z0-9-]{0,60} [a-zA-Z0-9])?
)";

constexpr std::string_view kDomain = R"(@domain ::= (@dlabel "."){1,3} [a-zA-Z]{2,6}
@dlabel ::= [a-zA-Z0-9] ([a-zA-Z0-9] | "-" [a-zA-Z0-9]){0,14}
)";

constexpr std::string_view kEmail = R"(@email ::= @atom ("." @atom){0,3} "@" @domain
@atom ::= [a-zA-Z0-9_+-]{1,15}
)";

constexpr std::string_view kIpv4 = R"(@ipv4 ::= @octet "." @octet "." @octet "." @octet
@octet ::= "25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9]
)";

constexpr std::string_view kUri =
    R"(@uri ::= ("https" | "http") "://" @domain (":" [1-9] [0-9]{0,3})? ("/" @segment){0,6} ("?" @query)? ("#" @query)?
@segment ::= @pchar{0,32}
@pchar ::= [a-zA-Z0-9._~!$&'()*+,;=:-] | "%" [0-9A-F] [0-9A-F]
@query ::= (@pchar | [/?]){0,64}
)";

constexpr std::string_view kByte =
    R"(@byte ::= @b64{0,64} ([A-Za-z0-9+/]{2} "==" | [A-Za-z0-9+/]{3} "=")?
@b64 ::= [A-Za-z0-9+/]{4}
)";

// IPv6: eight groups, or k groups "::" up to 7 − k groups.
std::string ipv6_rules() {
  std::string alts = "@h16 (\":\" @h16){7} | \"::\" @right7?";
  for (int left = 1; left <= 7; ++left) {
    alts += fmt::format(" | @h16{} \"::\"{}",
                        left > 1 ? fmt::format(" (\":\" @h16){{{}}}", left - 1) : "",
                        left < 7 ? fmt::format(" @right{}?", 7 - left) : "");
  }
  std::string rules = "@ipv6 ::= " + alts + "\n@h16 ::= [0-9a-f]{1,4}\n";
  for (int n = 1; n <= 7; ++n) {
    rules += fmt::format("@right{} ::= @h16{}\n", n,
                         n > 1 ? fmt::format(" (\":\" @h16){{0,{}}}", n - 1) : "");
  }
  return rules;
}

struct FormatDef {
  std::string root;   // the template rule of the format
  std::string rules;  // the templates it needs
};

std::optional<FormatDef> find_format(std::string_view f) {
  const std::string date(kDate), time(kTime);
  if (f == "date") return FormatDef{"@date", date};
  if (f == "time" || f == "iso-time") return FormatDef{"@time", time};
  if (f == "date-time" || f == "iso-date-time") {
    return FormatDef{"@datetime", "@datetime ::= @date \"T\" @time\n" + date + time};
  }
  if (f == "duration") return FormatDef{"@duration", std::string(kDuration)};
  if (f == "uuid") {
    return FormatDef{"@uuid",
                     "@uuid ::= [0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" "
                     "[0-9a-f]{4} \"-\" [0-9a-f]{12}\n"};
  }
  if (f == "email") return FormatDef{"@email", std::string(kEmail) + std::string(kDomain)};
  if (f == "hostname") return FormatDef{"@hostname", std::string(kHostname)};
  if (f == "ipv4") return FormatDef{"@ipv4", std::string(kIpv4)};
  if (f == "ipv6") return FormatDef{"@ipv6", ipv6_rules()};
  if (f == "uri" || f == "uri-reference") {
    return FormatDef{"@uri", std::string(kUri) + std::string(kDomain)};
  }
  if (f == "byte") return FormatDef{"@byte", std::string(kByte)};
  return std::nullopt;
}

const std::set<std::string_view> kRefusedFormats = {"url",
                                                    "uri-template",
                                                    "regex",
                                                    "json-pointer",
                                                    "json-pointer-uri-fragment",
                                                    "relative-json-pointer",
                                                    "idn-email",
                                                    "idn-hostname",
                                                    "iri",
                                                    "iri-reference"};

std::string rename(std::string_view text, std::string_view prefix) {
  std::string out;
  for (char c : text) {
    if (c == '@' && !out.empty() && out.back() == '[') {
      out += c;  // '@' inside a character class is a character
    } else if (c == '@' &&
               (out.empty() || out.back() == ' ' || out.back() == '\n' || out.back() == '(')) {
      out += prefix;
    } else {
      out += c;
    }
  }
  return out;
}

Status refused(std::string_view f) {
  return Status::invalid_argument(
      fmt::format("JSON Schema keyword `format` with value \"{}\" is not supported", f));
}

// Every bounded repetition {m,n} (n > m) cut to {m, m + (n − m)·permille/1000}.
std::string scale(std::string_view text, int permille) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const size_t close = text[i] == '{' ? text.find('}', i) : std::string_view::npos;
    const size_t comma =
        close != std::string_view::npos ? text.find(',', i) : std::string_view::npos;
    if (comma == std::string_view::npos || comma > close || comma == i + 1 || close == comma + 1) {
      out += text[i];
      continue;
    }
    const int m = std::stoi(std::string(text.substr(i + 1, comma - i - 1)));
    const int n = std::stoi(std::string(text.substr(comma + 1, close - comma - 1)));
    out += fmt::format("{{{},{}}}", m, m + (n - m) * permille / 1000);
    i = close;
  }
  return out;
}

Result<FormatGrammar> build(const FormatDef& def, std::string_view prefix, int permille) {
  FormatGrammar g;
  g.root = rename(def.root, prefix);
  g.rules = rename(scale(def.rules, permille), prefix);
  KEEL_ASSIGN_OR_RETURN(Grammar parsed, parse_gbnf(g.standalone()));
  const CharBounds b = char_bounds(parsed, parsed.root);
  g.length = LengthRange{b.min, b.max};
  return g;
}

}  // namespace

Result<std::optional<FormatGrammar>> format_grammar(std::string_view format,
                                                    std::string_view prefix,
                                                    std::optional<uint32_t> max_chars) {
  std::optional<FormatDef> def = find_format(format);
  if (!def) {
    if (kRefusedFormats.count(format) != 0) return refused(format);
    return std::optional<FormatGrammar>();
  }
  KEEL_ASSIGN_OR_RETURN(FormatGrammar full, build(*def, prefix, 1000));
  if (!max_chars || (full.length.max && *full.length.max <= *max_chars)) return std::optional(full);
  // The largest cut that fits (binary search over thousandths).
  int lo = 0, hi = 1000;
  KEEL_ASSIGN_OR_RETURN(FormatGrammar least, build(*def, prefix, 0));
  if (!least.length.max || *least.length.max > *max_chars) {
    return Status::invalid_argument(fmt::format(
        "JSON Schema keyword `maxLength` is not supported: format \"{}\" makes no string of at "
        "most {} characters",
        format, *max_chars));
  }
  FormatGrammar best = least;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    KEEL_ASSIGN_OR_RETURN(FormatGrammar g, build(*def, prefix, mid));
    if (g.length.max && *g.length.max <= *max_chars) {
      lo = mid;
      best = std::move(g);
    } else {
      hi = mid;
    }
  }
  return std::optional(best);
}

}  // namespace keel::grammar
