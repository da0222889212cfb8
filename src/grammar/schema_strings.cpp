// String keywords → GBNF (schema_compiler.h's string_expr): minLength / maxLength over JSON
// string characters, pattern (regex.h, leading lookaheads included), format (schema_formats.h).
// One constraint alone is its own grammar. Several on the same string — format with pattern, a
// pattern's lookaheads, lengths that the format or pattern does not already imply
// (grammar_bounds.h) — are intersected as regular languages (regular_product.h); a product too
// large, or empty, is refused naming the keyword.
#include <fmt/format.h>

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_bounds.h"
#include "grammar/regex.h"
#include "grammar/regular_product.h"
#include "grammar/schema_compiler.h"
#include "grammar/schema_formats.h"

namespace keel::grammar {
namespace {

constexpr std::string_view kJsonChar = R"(json-char ::= [^"\\\x00-\x1F\x7F] | "\\" ["\\/bfnrt])";

struct Operand {
  std::string expr;   // within this compilation's rules (format: its rule; pattern: an expression)
  std::string gbnf;   // a complete grammar of the same language, for intersections
  CharBounds bounds;  // its strings' lengths
};

Result<CharBounds> bounds_of(const std::string& gbnf) {
  KEEL_ASSIGN_OR_RETURN(Grammar g, parse_gbnf(gbnf));
  return char_bounds(g, g.root);
}

// The operands from `format` (shortened to maxLength when needed) and `pattern`, and the
// pattern's lookaheads.
Status read_operands(SchemaCompiler& c, const SchemaJson& s, int64_t max, std::vector<Operand>* ops,
                     std::vector<RegularOperand>* lookaheads) {
  if (s.contains("format")) {
    if (!s["format"].is_string()) return Status::invalid_argument("`format` must be a string");
    std::optional<uint32_t> max_chars;
    if (max >= 0) max_chars = static_cast<uint32_t>(max);
    KEEL_ASSIGN_OR_RETURN(
        std::optional<FormatGrammar> f,
        format_grammar(s["format"].get<std::string>(), c.writer().fresh("fmt") + "-", max_chars));
    if (f) {
      // The rules are written once here; the standalone text serves intersections.
      size_t line = 0;
      while (line < f->rules.size()) {
        const size_t end = f->rules.find('\n', line);
        const std::string_view l(f->rules.data() + line, end - line);
        const size_t eq = l.find(" ::= ");
        c.writer().define(l.substr(0, eq), l.substr(eq + 5));
        line = end + 1;
      }
      ops->push_back({f->root, f->standalone(), CharBounds{f->length.min, f->length.max}});
    }
  }
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) return Status::invalid_argument("`pattern` must be a string");
    KEEL_ASSIGN_OR_RETURN(RegexParts parts,
                          regex_parts(s["pattern"].get<std::string>(), /*json_string=*/true));
    // Alone, the pattern is generated as a whole-string match (a valid subset); intersected,
    // with JSON Schema's search semantics: any text around an unanchored end.
    const std::string g = "root ::= " + parts.expr + "\n";
    KEEL_ASSIGN_OR_RETURN(CharBounds b, bounds_of(g));
    const std::string searched =
        fmt::format("root ::= {}{}{}\n{}\n", parts.anchored_start ? "" : "json-char* ", parts.expr,
                    parts.anchored_end ? "" : " json-char*", kJsonChar);
    ops->push_back({parts.expr, searched, b});
    using Kind = RegularOperand::Kind;
    for (const RegexParts::Lookahead& la : parts.lookaheads) {
      const Kind kind = la.anchored_end ? (la.negative ? Kind::kNoMatch : Kind::kMatch)
                                        : (la.negative ? Kind::kNoPrefix : Kind::kSomePrefix);
      lookaheads->push_back({"root ::= " + la.expr + "\n", kind});
    }
  }
  return Status();
}

}  // namespace

Result<std::string> string_expr(SchemaCompiler& c, const SchemaJson& s) {
  KEEL_ASSIGN_OR_RETURN(int64_t min, count_keyword(s, "minLength", 0));
  KEEL_ASSIGN_OR_RETURN(int64_t max, count_keyword(s, "maxLength", -1));
  if (max >= 0 && max < min) return Status::invalid_argument("`maxLength` below `minLength`");
  std::vector<Operand> ops;
  std::vector<RegularOperand> lookaheads;
  KEEL_TRY(read_operands(c, s, max, &ops, &lookaheads));
  std::string body;
  if (ops.empty()) {
    if (!s.contains("minLength") && !s.contains("maxLength")) return std::string("json-string");
    body = fmt::format("json-char{{{},{}}}", min, max >= 0 ? std::to_string(max) : "");
  } else {
    // Lengths already implied by some operand need no counting.
    bool min_implied = min == 0, max_implied = max < 0;
    for (const Operand& o : ops) {
      min_implied = min_implied || o.bounds.min >= min;
      max_implied = max_implied || (o.bounds.max && static_cast<int64_t>(*o.bounds.max) <= max);
    }
    if (ops.size() == 1 && lookaheads.empty() && min_implied && max_implied) {
      body = ops[0].expr;
    } else {
      std::vector<RegularOperand> all;
      for (const Operand& o : ops) all.push_back({o.gbnf, RegularOperand::Kind::kMatch});
      for (RegularOperand& la : lookaheads) all.push_back(std::move(la));
      if (!min_implied || !max_implied) {
        all.push_back({fmt::format("root ::= json-char{{{},{}}}\n{}\n", min,
                                   max >= 0 ? std::to_string(max) : "", kJsonChar),
                       RegularOperand::Kind::kMatch});
      }
      Result<std::string> both = intersect_regular(c.writer(), all);
      if (!both.ok()) {
        const char* key = ops.size() > 1 ? "pattern"
                          : !max_implied ? "maxLength"
                          : !min_implied ? "minLength"
                                         : "pattern";
        return unsupported(key, fmt::format("together with the string's other keywords: {}",
                                            both.error().message()));
      }
      body = *both;
    }
  }
  return c.writer().add("str", fmt::format("\"\\\"\" {} \"\\\"\"", body));
}

}  // namespace keel::grammar
