// Numeric keywords as grammar (grammar/schema_numbers.h): integer ranges and multiples checked
// exhaustively against the arithmetic, decimal bounds at every hundredth of a range, exclusive
// bounds at 15 significant digits, decimal multipleOf, random walks, refusals.
#include "grammar/schema_numbers.h"

#include <gtest/gtest.h>

#include <cmath>

#include "grammar/decimal.h"
#include "grammar/schema_test_util.h"

namespace keel::grammar {
namespace {

using testing::accepts;
using testing::compile_schema;
using testing::OJson;
using testing::refusal;

TEST(SchemaNumbers, IntegerRangesAndMultiplesAreExact) {
  std::mt19937 rng(11);
  for (int round = 0; round < 60; ++round) {
    const int lo = static_cast<int>(rng() % 400) - 250, hi = lo + static_cast<int>(rng() % 300);
    const int k = round % 3 == 0 ? 1 : 1 + static_cast<int>(rng() % 40);
    const bool excl_lo = rng() % 2 == 0, excl_hi = rng() % 2 == 0;
    OJson s = {{"type", "integer"}};
    s[excl_lo ? "exclusiveMinimum" : "minimum"] = lo;
    s[excl_hi ? "exclusiveMaximum" : "maximum"] = hi;
    if (k > 1) s["multipleOf"] = k;
    const int first = excl_lo ? lo + 1 : lo, last = excl_hi ? hi - 1 : hi;
    bool any = false;
    for (int x = first; x <= last; ++x) any = any || x % k == 0;
    Result<std::string> text = json_schema_to_gbnf(s);
    ASSERT_EQ(text.ok(), any) << s.dump();
    if (!any) continue;
    Grammar g = compile_schema(s);
    for (int x = -320; x <= 320; ++x) {
      const bool want = x >= first && x <= last && x % k == 0;
      EXPECT_EQ(accepts(g, std::to_string(x)), want) << s.dump() << " x=" << x;
    }
    EXPECT_FALSE(accepts(g, "-0"));
    EXPECT_FALSE(accepts(g, "00"));
    EXPECT_FALSE(accepts(g, "1.0"));
  }
}

TEST(SchemaNumbers, SafeIntegerBoundsAndPowersOfTen) {
  Grammar g = compile_schema(
      R"({"type": "integer", "minimum": -9007199254740991, "maximum": 9007199254740991})");
  EXPECT_TRUE(accepts(g, "9007199254740991"));
  EXPECT_TRUE(accepts(g, "-9007199254740991"));
  EXPECT_FALSE(accepts(g, "9007199254740992"));
  EXPECT_TRUE(accepts(g, "12"));
  Grammar thousands =
      compile_schema(R"({"type": "integer", "multipleOf": 1000, "minimum": -5000})");
  EXPECT_TRUE(accepts(thousands, "0"));
  EXPECT_TRUE(accepts(thousands, "-5000"));
  EXPECT_TRUE(accepts(thousands, "123000"));
  EXPECT_FALSE(accepts(thousands, "-6000"));
  EXPECT_FALSE(accepts(thousands, "1500"));
  EXPECT_FALSE(accepts(thousands, "000"));
  // An integer that must be a multiple of 0.5 may be any integer; of 2.5, a multiple of 5.
  Grammar halves = compile_schema(R"({"type": "integer", "multipleOf": 2.5, "maximum": 20})");
  EXPECT_TRUE(accepts(halves, "15"));
  EXPECT_FALSE(accepts(halves, "12"));
  EXPECT_FALSE(accepts(halves, "25"));
  Grammar int32 = compile_schema(R"({"type": "number", "format": "int32"})");
  EXPECT_TRUE(accepts(int32, "-2147483648"));
  EXPECT_FALSE(accepts(int32, "2147483648"));
  EXPECT_FALSE(accepts(int32, "1.5"));
}

// Every number with at most two decimals in [-6, 6] is accepted exactly when within the bounds.
TEST(SchemaNumbers, DecimalBoundsAreExact) {
  const char* schemas[] = {
      R"({"type": "number", "minimum": -2.5, "exclusiveMaximum": 3.75})",
      R"({"type": "number", "exclusiveMinimum": -0.05, "maximum": 0.3})",
      R"({"type": "number", "exclusiveMinimum": 0})",
      R"({"type": "number", "minimum": 1.25, "maximum": 1.5})",
      R"({"type": "number", "exclusiveMinimum": -4, "exclusiveMaximum": -1.1})",
      R"({"type": "number", "maximum": 0})",
  };
  for (const char* text : schemas) {
    const OJson s = OJson::parse(text);
    Grammar g = compile_schema(s);
    auto bound = [&](const char* k) { return s.contains(k) ? s[k].get<double>() : NAN; };
    for (int hundredths = -600; hundredths <= 600; ++hundredths) {
      const double x = hundredths / 100.0;
      bool want = true;
      if (s.contains("minimum")) want = want && x >= bound("minimum") - 1e-12;
      if (s.contains("maximum")) want = want && x <= bound("maximum") + 1e-12;
      if (s.contains("exclusiveMinimum")) want = want && x > bound("exclusiveMinimum") + 1e-12;
      if (s.contains("exclusiveMaximum")) want = want && x < bound("exclusiveMaximum") - 1e-12;
      const int a = std::abs(hundredths);
      const std::string sign = hundredths < 0 ? "-" : "";
      const std::string two = fmt::format("{}{}.{:02}", sign, a / 100, a % 100);
      EXPECT_EQ(accepts(g, two), want) << text << " " << two;
      if (a % 10 == 0) {
        const std::string one = fmt::format("{}{}.{}", sign, a / 100, (a % 100) / 10);
        EXPECT_EQ(accepts(g, one), want) << text << " " << one;
      }
      if (a % 100 == 0 && a != 0) {
        EXPECT_EQ(accepts(g, fmt::format("{}{}", sign, a / 100)), want) << text << " " << x;
      }
    }
    EXPECT_FALSE(accepts(g, "1e0")) << text;  // bounded numbers are written without exponent
  }
}

// Exclusive bounds hold for the doubles clients parse: at most 15 significant digits.
TEST(SchemaNumbers, ExclusiveBoundsSurviveDoubleRounding) {
  Grammar g = compile_schema(R"({"type": "number", "exclusiveMaximum": 1, "minimum": 0})");
  EXPECT_TRUE(accepts(g, "0.99999999999999"));     // 14 fraction digits
  EXPECT_FALSE(accepts(g, "0.999999999999999"));   // 15: more than 15 significant digits
  EXPECT_FALSE(accepts(g, "0.9999999999999999"));  // would parse to 1.0
  Grammar big = compile_schema(R"({"type": "number", "exclusiveMaximum": 100000})");
  EXPECT_TRUE(accepts(big, "99999.9999999999"));
  EXPECT_FALSE(accepts(big, "99999.99999999999"));
  std::mt19937 rng(3);
  for (int i = 0; i < 200; ++i) {
    const std::string doc = testing::random_walk(g, rng, static_cast<int>(rng() % 40));
    const double v = std::stod(doc);
    EXPECT_TRUE(v >= 0 && v < 1) << doc;
  }
}

TEST(SchemaNumbers, DecimalMultiplesHaveFixedDecimals) {
  Grammar g = compile_schema(R"({"type": "number", "multipleOf": 0.25, "minimum": -1,
                                 "exclusiveMaximum": 1})");
  for (const char* ok : {"-1.00", "-0.75", "-0.25", "0.00", "0.50", "0.75"}) {
    EXPECT_TRUE(accepts(g, ok)) << ok;
  }
  for (const char* bad : {"1.00", "0.10", "-1.25", "0.5", "0", "0.250"}) {
    EXPECT_FALSE(accepts(g, bad)) << bad;
  }
  Grammar cents = compile_schema(R"({"type": "number", "multipleOf": 0.01, "minimum": 0})");
  EXPECT_TRUE(accepts(cents, "19.99"));
  EXPECT_TRUE(accepts(cents, "0.07"));
  EXPECT_FALSE(accepts(cents, "0.071"));
  EXPECT_FALSE(accepts(cents, "-0.01"));
  Grammar whole = compile_schema(R"({"type": "number", "multipleOf": 5, "maximum": 12})");
  EXPECT_TRUE(accepts(whole, "10"));
  EXPECT_TRUE(accepts(whole, "-15"));
  EXPECT_FALSE(accepts(whole, "15"));
  EXPECT_FALSE(accepts(whole, "2.5"));
}

TEST(SchemaNumbers, RandomWalksValidate) {
  const char* schemas[] = {
      R"({"type": "integer", "minimum": -1000000, "maximum": 1000000, "multipleOf": 7})",
      R"({"type": "integer", "exclusiveMinimum": 0})",
      R"({"type": "integer", "maximum": -3})",
      R"({"type": "number", "minimum": 0, "maximum": 1})",
      R"({"type": "number", "exclusiveMinimum": -273.15})",
      R"({"type": "number", "multipleOf": 0.05, "exclusiveMinimum": 0, "maximum": 100})",
      R"({"type": ["integer", "null"], "minimum": 18, "maximum": 120})",
      R"({"minimum": 2, "maximum": 3})",
      R"({"type": "number", "minimum": 5, "exclusiveMinimum": true, "maximum": 6})",
  };
  for (const char* text : schemas) testing::expect_walks_validate(OJson::parse(text), 60);
}

TEST(SchemaNumbers, RefusalsNameTheKeywords) {
  EXPECT_NE(refusal(R"({"type": "integer", "minimum": 5, "maximum": 4})").find("`minimum`"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type": "integer", "minimum": 1, "maximum": 6, "multipleOf": 7})")
                .find("`multipleOf`"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type": "number", "multipleOf": 0})").find("`multipleOf`"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type": "number", "multipleOf": 0.0123})").find("`multipleOf`"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type": "number", "minimum": "3"})").find("`minimum`"), std::string::npos);
  EXPECT_NE(refusal(R"({"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 1})")
                .find("`exclusiveMaximum`"),
            std::string::npos);
}

TEST(Decimal, ParsesAndRoundsExactly) {
  const Decimal a = *Decimal::parse("-12.50");
  EXPECT_TRUE(a.negative);
  EXPECT_EQ(a.digits, "125");
  EXPECT_EQ(a.exp, -1);
  EXPECT_EQ(a.floor_scaled(0, 1000), -13);
  EXPECT_EQ(a.ceil_scaled(0, 1000), -12);
  EXPECT_EQ(a.ceil_scaled(1, 1000), -125);
  EXPECT_EQ(Decimal::parse("1e-05")->to_string(), "0.00001");
  EXPECT_EQ(Decimal::parse("2.5E3")->int_digits(), "2500");
  EXPECT_EQ(Decimal::parse("0.075")->frac_digits(), "075");
  EXPECT_LT(compare(*Decimal::parse("0.1"), *Decimal::parse("0.10000001")), 0);
  EXPECT_EQ(compare(*Decimal::parse("-0"), *Decimal::parse("0.0")), 0);
  EXPECT_FALSE(Decimal::parse("abc").has_value());
  EXPECT_EQ(Decimal::parse("1e300")->floor_scaled(0, 99), 99);
}

}  // namespace
}  // namespace keel::grammar
