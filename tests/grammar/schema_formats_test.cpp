// String formats as grammar (grammar/schema_formats.h): valid and invalid examples per format
// (calendar days and leap years for dates), random walks checked by the independent format
// checker (format_check.h), the formats' exact length ranges, and format with minLength /
// maxLength. ajv-formats checks the same grammars' samples in tests/sdk.
#include "grammar/schema_formats.h"

#include <gtest/gtest.h>

#include "grammar/format_check.h"
#include "grammar/schema_test_util.h"

namespace keel::grammar {
namespace {

using testing::accepts;
using testing::compile_schema;
using testing::OJson;
using testing::refusal;

Grammar compiled_format(const char* f) {
  return compile_schema(OJson{{"type", "string"}, {"format", f}});
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

LengthRange length_of(const char* f) {
  Result<std::optional<FormatGrammar>> g = format_grammar(f, "t-", std::nullopt);
  EXPECT_TRUE(g.ok() && g->has_value()) << f;
  return g.ok() && g->has_value() ? (*g)->length : LengthRange{};
}

TEST(SchemaFormats, DatesFollowTheCalendar) {
  Grammar g = compiled_format("date");
  for (int year : {1900, 1996, 2000, 2023, 2024, 2100, 2400}) {
    const bool leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    for (int month = 0; month <= 13; ++month) {
      for (int day = 0; day <= 32; ++day) {
        const std::string d = fmt::format("{:04}-{:02}-{:02}", year, month, day);
        EXPECT_EQ(accepts(g, quoted(d)), testing::format_valid("date", d)) << d;
      }
    }
    EXPECT_EQ(accepts(g, quoted(fmt::format("{:04}-02-29", year))), leap) << year;
  }
  EXPECT_FALSE(accepts(g, quoted("2024-1-01")));
}

TEST(SchemaFormats, ExamplesPerFormat) {
  struct Case {
    const char* format;
    std::vector<std::string> good, bad;
  };
  const std::vector<Case> cases = {
      {"time",
       {"23:59:59Z", "00:00:00.123+05:30", "12:30:00-08:00"},
       {"24:00:00Z", "12:60:00Z", "12:00:00", "12:00:00+24:00", "1:00:00Z"}},
      {"date-time",
       {"2024-02-29T12:00:00Z", "1999-12-31T23:59:59.5-01:00"},
       {"2023-02-29T12:00:00Z", "2024-01-01 12:00:00Z", "2024-01-01T12:00Z"}},
      {"duration",
       {"P1Y", "P1Y2M3DT4H5M6S", "PT30M", "P3W", "P1D"},
       {"P", "PT", "P1S", "P1H", "P1W2D", "1Y"}},
      {"uuid",
       {"123e4567-e89b-12d3-a456-426614174000"},
       {"123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g"}},
      {"email",
       {"a.b+c@example.com", "x@a-b.co"},
       {"a@b", "a..b@c.com", "@c.com", "a@-b.com", "a@b.c0", "a@ab--c.com"}},
      {"hostname", {"example.com", "a", "a-b.c1"}, {"-a.com", "a_b", "a..b", ""}},
      {"ipv4",
       {"0.0.0.0", "255.255.255.255", "10.1.20.199"},
       {"256.1.1.1", "01.1.1.1", "1.1.1", "1.1.1.1.1"}},
      {"ipv6",
       {"::", "::1", "fe80::1:2", "2001:db8:0:0:0:0:2:1", "1:2:3:4:5:6:7::"},
       {"1:2:3:4:5:6:7:8:9", "1::2::3", "12345::", ":1:2"}},
      {"uri",
       {"https://example.com", "http://a.bc:8080/x/y?q=1&r=%20#frag"},
       {"example.com", "https://", "https://a b", "ftp:x", "http://a.b", "http://a.bc/@"}},
      {"byte", {"", "aGVsbG8=", "aGk=", "YWJj"}, {"aGk", "a===", "a$bc"}},
  };
  for (const Case& c : cases) {
    Grammar g = compiled_format(c.format);
    for (const std::string& s : c.good) EXPECT_TRUE(accepts(g, quoted(s))) << c.format << " " << s;
    for (const std::string& s : c.bad) EXPECT_FALSE(accepts(g, quoted(s))) << c.format << " " << s;
  }
}

TEST(SchemaFormats, RandomWalksAreValidAndWithinTheirLengths) {
  for (const char* f : {"date", "time", "date-time", "duration", "uuid", "email", "hostname",
                        "ipv4", "ipv6", "uri", "byte", "iso-time", "iso-date-time"}) {
    Grammar g = compiled_format(f);
    const LengthRange len = length_of(f);
    ASSERT_TRUE(len.max.has_value()) << f;
    std::mt19937 rng(5);
    for (int i = 0; i < 60; ++i) {
      const std::string doc = testing::random_walk(g, rng, static_cast<int>(rng() % 120));
      ASSERT_GE(doc.size(), 2u) << f;
      const std::string s = doc.substr(1, doc.size() - 2);
      EXPECT_TRUE(testing::format_valid(f, s)) << f << ": " << s;
      EXPECT_GE(s.size(), len.min) << f << ": " << s;
      EXPECT_LE(s.size(), *len.max) << f << ": " << s;
    }
  }
  EXPECT_EQ(length_of("uuid").min, 36u);
  EXPECT_EQ(*length_of("uuid").max, 36u);
  EXPECT_EQ(*length_of("date").max, 10u);
  EXPECT_LE(*length_of("hostname").max, 253u);
  EXPECT_LE(*length_of("email").max, 254u);  // zod's email().max(255) needs no counting
  EXPECT_LE(*length_of("uri").max, 2083u);   // pydantic's HttpUrl maxLength
}

TEST(SchemaFormats, LengthsPatternsAndFormatsTogether) {
  // Implied lengths are honoured as they stand (pydantic's HttpUrl: uri, 1 to 2083).
  EXPECT_EQ(refusal(R"({"type": "string", "format": "uri", "minLength": 1, "maxLength": 2083})"),
            "ok");
  EXPECT_EQ(refusal(R"({"type": "string", "format": "uuid", "maxLength": 36})"), "ok");
  EXPECT_NE(refusal(R"({"type": "string", "format": "email", "maxLength": 5})").find("`maxLength`"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type": "string", "format": "date", "minLength": 11})").find("`minLength`"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type": "string", "format": "regex"})").find("`format`"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type": "string", "format": "date", "pattern": "^x"})").find("`pattern`"),
            std::string::npos);
  // A shortened format, a pattern with lengths, a format with a pattern (zod 4 emits both, with
  // leading lookaheads for email) are intersected.
  const char* schemas[] = {
      R"({"type": "string", "format": "email", "maxLength": 24})",
      R"({"type": "string", "format": "uri", "maxLength": 40})",
      R"({"type": "string", "format": "hostname", "minLength": 6, "maxLength": 12})",
      R"({"type": "string", "pattern": "^[a-z]+$", "minLength": 3, "maxLength": 8})",
      R"({"type": "string", "format": "date", "pattern": "^20"})",
      R"({"type": "string", "format": "uuid", "pattern": "^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000)$"})",
      R"({"type": "string", "format": "email", "pattern": "^(?!\\.)(?!.*\\.\\.)([A-Za-z0-9_'+\\-\\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$"})",
  };
  for (const char* text : schemas) testing::expect_walks_validate(OJson::parse(text), 40);
  Grammar g = compile_schema(R"({"type": "string", "pattern": "^(?!ab)[a-c]{2}$"})");
  EXPECT_TRUE(accepts(g, "\"ba\""));
  EXPECT_FALSE(accepts(g, "\"ab\""));
  Grammar p = compile_schema(R"({"type": "string", "pattern": "^(?=.*z)[xyz]{3}$"})");
  EXPECT_TRUE(accepts(p, "\"xxz\""));
  EXPECT_FALSE(accepts(p, "\"xxy\""));
}

}  // namespace
}  // namespace keel::grammar
