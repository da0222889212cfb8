// Regex → grammar: whole-text matches, JSON-string escaping, refused constructs.
#include "grammar/regex.h"

#include <gtest/gtest.h>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"

namespace keel::grammar {
namespace {

bool full_match(std::string_view pattern, std::string_view text) {
  Result<std::string> gbnf = regex_grammar(pattern);
  EXPECT_TRUE(gbnf.ok()) << gbnf.error().to_string();
  if (!gbnf.ok()) return false;
  Result<Grammar> g = parse_gbnf(*gbnf);
  EXPECT_TRUE(g.ok()) << g.error().to_string() << "\n" << *gbnf;
  if (!g.ok()) return false;
  StackSet s = initial_state(*g);
  return advance(*g, text, &s) && s.has_complete();
}

TEST(Regex, Matches) {
  EXPECT_TRUE(full_match(R"(^\d{3}-[A-Z]+$)", "123-AB"));
  EXPECT_FALSE(full_match(R"(^\d{3}-[A-Z]+$)", "12-AB"));
  EXPECT_TRUE(full_match(R"((cat|dog)s?)", "dogs"));
  EXPECT_FALSE(full_match(R"((cat|dog)s?)", "cow"));
  EXPECT_TRUE(full_match(R"([^\s]+\.txt)", "a.b.txt"));
  EXPECT_FALSE(full_match(R"([^\s]+\.txt)", "a b.txt"));
  EXPECT_TRUE(full_match(R"(a.c)", "a€c"));
  EXPECT_TRUE(full_match(R"((?:ab){2,3}?)", "ababab"));
  EXPECT_FALSE(full_match(R"((?:ab){2,3})", "ab"));
  EXPECT_TRUE(full_match(R"([\w.]+@x\.org)", "j.doe_1@x.org"));
  EXPECT_TRUE(full_match("", ""));
}

TEST(Regex, JsonStringContentsAreEscaped) {
  Result<std::string> e = regex_to_gbnf(R"(a"[^b])", true);
  ASSERT_TRUE(e.ok());
  Result<Grammar> g = parse_gbnf("root ::= " + *e);
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  StackSet s = initial_state(*g);
  EXPECT_TRUE(advance(*g, "a\\\"c", &s) && s.has_complete());
  s = initial_state(*g);
  EXPECT_FALSE(advance(*g, "a\"c", &s));
  s = initial_state(*g);
  EXPECT_FALSE(advance(*g, "a\\\"\"", &s));  // the class never yields a raw quote
}

// JSON Schema's search semantics, by the matcher: no backtracking, so a pattern that makes a
// backtracking engine take exponential time is linear here.
TEST(Regex, SearchFindsMatchesAnywhereUnlessAnchored) {
  EXPECT_EQ(regex_search("b+", "abbc"), true);
  EXPECT_EQ(regex_search("^b+", "abbc"), false);
  EXPECT_EQ(regex_search("c$", "abbc"), true);
  EXPECT_EQ(regex_search("^x-[a-z]+$", "x-ab"), true);
  EXPECT_EQ(regex_search("^x-[a-z]+$", "x-ab1"), false);
  EXPECT_EQ(regex_search("(a|aa)*b", std::string(64, 'a')), false);
  EXPECT_EQ(regex_search("(?=a)", "a"), std::nullopt);
  // Leading lookaheads come apart for intersections; anchors and the rest are reported.
  Result<RegexParts> p = regex_parts(R"(^(?!\.)(?=.*@)[a-z.@]+$)", false);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  ASSERT_EQ(p->lookaheads.size(), 2u);
  EXPECT_TRUE(p->lookaheads[0].negative);
  EXPECT_FALSE(p->lookaheads[1].negative);
  EXPECT_TRUE(p->anchored_start && p->anchored_end);
  Result<RegexParts> q = regex_parts(R"(^(?!^[-+.]*$)[+-]?\d*$)", false);
  ASSERT_TRUE(q.ok()) << q.error().to_string();
  EXPECT_TRUE(q->lookaheads[0].anchored_end);
}

TEST(Regex, RefusedConstructs) {
  for (const char* p : {"(?=a)", "a\\1", "\\bword", "a^b", "a++", "*a", "[a", "(a", "\\p{L}"}) {
    EXPECT_FALSE(regex_to_gbnf(p, false).ok()) << p;
  }
}

}  // namespace
}  // namespace keel::grammar
