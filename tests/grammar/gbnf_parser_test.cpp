// The GBNF parser and the byte-level matcher: languages accepted, prefixes, errors.
#include "grammar/gbnf_parser.h"

#include <gtest/gtest.h>

#include "grammar/matcher.h"

namespace keel::grammar {
namespace {

Grammar parse(std::string_view text) {
  Result<Grammar> g = parse_gbnf(text);
  EXPECT_TRUE(g.ok()) << g.error().to_string();
  return g.ok() ? std::move(g).value() : Grammar{};
}

// True when `text` is a complete match; *prefix (if given) tells whether it is a viable prefix.
bool matches(const Grammar& g, std::string_view text, bool* prefix = nullptr) {
  StackSet s = initial_state(g);
  const bool ok = advance(g, text, &s);
  if (prefix != nullptr) *prefix = ok;
  return ok && s.has_complete();
}

TEST(GbnfParser, LiteralsAlternativesAndGroups) {
  Grammar g = parse(R"(root ::= "a" ("b" | "cd")  tail
tail ::= "!" | )");
  EXPECT_TRUE(matches(g, "ab"));
  EXPECT_TRUE(matches(g, "acd!"));
  EXPECT_FALSE(matches(g, "ac"));
  bool prefix = false;
  EXPECT_FALSE(matches(g, "ac", &prefix));
  EXPECT_TRUE(prefix);
  EXPECT_FALSE(matches(g, "ax", &prefix));
  EXPECT_FALSE(prefix);
}

TEST(GbnfParser, Repetitions) {
  Grammar g = parse(R"(root ::= [0-9]+ "." [a-z]* "x"? "y"{2} "z"{1,3} "w"{2,})");
  EXPECT_TRUE(matches(g, "1.xyyzww"));
  EXPECT_TRUE(matches(g, "123.abcyyzzzwwww"));
  EXPECT_FALSE(matches(g, ".yyzww"));      // + needs one
  EXPECT_FALSE(matches(g, "1.yyzzzzww"));  // {1,3}
  EXPECT_FALSE(matches(g, "1.yzww"));      // {2}
  EXPECT_FALSE(matches(g, "1.yyzw"));      // {2,}
}

TEST(GbnfParser, CharacterClassesAreUnicodeAware) {
  Grammar g = parse(R"(root ::= [^a] [α-ω] .)");
  EXPECT_TRUE(matches(g, "bβc"));
  EXPECT_TRUE(matches(g, "€λ😀"));
  EXPECT_FALSE(matches(g, "aβc"));
  EXPECT_FALSE(matches(g, "bac"));
  EXPECT_FALSE(matches(g, "b\xCE"));              // half a character
  EXPECT_FALSE(matches(g, "\xC0\x80\xCE\xB2x"));  // overlong encoding is not a character
}

TEST(GbnfParser, EscapesAndComments) {
  Grammar g = parse("# a comment\nroot ::= \"\\n\\t\\\"\\x41\\u00e9\" [\\]\\-] # trailing\n");
  EXPECT_TRUE(matches(g, "\n\t\"A\xC3\xA9]"));
  EXPECT_TRUE(matches(g, "\n\t\"A\xC3\xA9-"));
}

TEST(GbnfParser, RecursionAndMultilineRules) {
  Grammar g = parse(R"(root ::= list
list ::= "[" (
    item ("," item)*
  )? "]"
item ::= list | [0-9])");
  EXPECT_TRUE(matches(g, "[]"));
  EXPECT_TRUE(matches(g, "[1,[2,[]],3]"));
  EXPECT_FALSE(matches(g, "[1,]"));
}

TEST(GbnfParser, MinRemainingCountsShortestCompletion) {
  Grammar g = parse(R"(root ::= "{" body "}"
body ::= "ab" | "c")");
  StackSet s = initial_state(g);
  EXPECT_EQ(min_remaining(g, s), 3u);
  ASSERT_TRUE(advance(g, "{", &s));
  EXPECT_EQ(min_remaining(g, s), 2u);
  ASSERT_TRUE(advance(g, "a", &s));
  EXPECT_EQ(min_remaining(g, s), 2u);
  ASSERT_TRUE(advance(g, "b}", &s));
  EXPECT_EQ(min_remaining(g, s), 0u);
  EXPECT_TRUE(s.has_complete());
}

TEST(GbnfParser, Errors) {
  auto message = [](std::string_view text) {
    Result<Grammar> g = parse_gbnf(text);
    return g.ok() ? std::string("ok") : g.error().message();
  };
  EXPECT_NE(message("root ::= missing").find("`missing` is undefined"), std::string::npos);
  EXPECT_NE(message("start ::= \"a\"").find("no rule `root`"), std::string::npos);
  EXPECT_NE(message("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(message("root ::= x\nx ::= y? x \"a\" | \"b\"\ny ::= \"c\"").find("left-recursive"),
            std::string::npos);
  EXPECT_NE(message("root ::= \"a\" root").find("never finish"), std::string::npos);
  EXPECT_NE(message("root ::= \"abc").find("unterminated"), std::string::npos);
  EXPECT_NE(message("root ::= [z-a]").find("out of order"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\"{5000}").find("above"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(message("root ::= (\"a\"").find("expected `)`"), std::string::npos);
  EXPECT_NE(message("").find("empty"), std::string::npos);
}

}  // namespace
}  // namespace keel::grammar
