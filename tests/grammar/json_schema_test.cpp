// JSON Schema → grammar: documents the schema allows are accepted, others refused; random walks
// through each grammar give documents that parse and validate (schema_check.h); unsupported
// keywords are refused by name.
#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <random>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"
#include "grammar/schema_check.h"

namespace keel::grammar {
namespace {

using Json = nlohmann::json;

Grammar compile(const Json& schema) {
  Result<std::string> text = json_schema_to_gbnf(schema);
  EXPECT_TRUE(text.ok()) << text.error().to_string();
  if (!text.ok()) return Grammar{};
  Result<Grammar> g = parse_gbnf(*text);
  EXPECT_TRUE(g.ok()) << g.error().to_string() << "\n" << *text;
  return g.ok() ? std::move(g).value() : Grammar{};
}

bool accepts(const Grammar& g, std::string_view text) {
  StackSet s = initial_state(g);
  return advance(g, text, &s) && s.has_complete();
}

// A random document: `wander` random bytes, then the shortest completion.
std::string random_walk(const Grammar& g, std::mt19937& rng, int wander) {
  StackSet s = initial_state(g), next;
  std::string out;
  for (int i = 0; i < 4000; ++i) {
    if (i >= wander && s.has_complete()) return out;
    std::vector<std::pair<uint32_t, uint8_t>> options;
    for (int b = 0; b < 256; ++b) {
      step(g, s, static_cast<uint8_t>(b), &next);
      if (!next.empty()) options.emplace_back(min_remaining(g, next), static_cast<uint8_t>(b));
    }
    if (options.empty()) return out;
    std::pair<uint32_t, uint8_t> pick = options[rng() % options.size()];
    if (i >= wander) pick = *std::min_element(options.begin(), options.end());
    out += static_cast<char>(pick.second);
    step(g, s, pick.second, &next);
    std::swap(s, next);
  }
  return out;
}

const char* kPerson = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 8},
    "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "minItems": 1, "maxItems": 2},
    "nick": {"type": ["string", "null"]},
    "score": {"type": "number"}
  },
  "required": ["name", "age", "tags"],
  "additionalProperties": false
})";

TEST(JsonSchema, AcceptsValidAndRejectsInvalid) {
  const Json schema = Json::parse(kPerson);
  Grammar g = compile(schema);
  // Properties come in the order nlohmann::json keeps them: sorted by name.
  EXPECT_TRUE(accepts(g, R"({"age":3,"name":"bo","tags":["a"]})"));
  EXPECT_TRUE(accepts(g, R"({ "age": -30, "name": "bo", "score": 1.5e3, "tags": ["a", 3] })"));
  EXPECT_TRUE(accepts(g, R"({"age":0,"name":"é\"x","nick":null,"tags":["b"]})"));
  EXPECT_FALSE(accepts(g, R"({"name":"bo","age":3,"tags":["a"]})"));         // another order
  EXPECT_FALSE(accepts(g, R"({"name":"bo","tags":["a"]})"));                 // age missing
  EXPECT_FALSE(accepts(g, R"({"age":3,"name":"bo","tags":[]})"));            // minItems
  EXPECT_FALSE(accepts(g, R"({"age":3,"name":"bo","tags":["c"]})"));         // enum
  EXPECT_FALSE(accepts(g, R"({"age":3,"name":"123456789","tags":["a"]})"));  // maxLength
  EXPECT_FALSE(accepts(g, R"({"age":3.5,"name":"bo","tags":["a"]})"));       // integer
  EXPECT_FALSE(accepts(g, R"({"age":3,"name":"bo","tags":["a"],"x":1})"));   // additional
  EXPECT_FALSE(accepts(g, R"({"age":01,"name":"bo","tags":["a"]})"));        // leading zero
}

TEST(JsonSchema, RandomWalksValidate) {
  const char* schemas[] = {
      kPerson,
      R"({"type": "array", "items": {"type": "object", "properties": {"k": {"const": {"x": [1]}}},
          "required": ["k"]}, "maxItems": 3})",
      R"({"anyOf": [{"type": "integer"}, {"type": "string", "minLength": 2, "maxLength": 3}]})",
      R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "boolean"},
          "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
          "required": ["v"]}}, "$ref": "#/$defs/node"})",
      R"({"type": "object", "properties": {"id": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"},
          "when": {"type": "string", "pattern": "^(am|pm)\"?$"}}, "required": ["id", "when"]})",
      R"({})",
  };
  std::mt19937 rng(7);
  for (const char* text : schemas) {
    const Json schema = Json::parse(text);
    Grammar g = compile(schema);
    for (int i = 0; i < 40; ++i) {
      const std::string doc = random_walk(g, rng, static_cast<int>(rng() % 60));
      const Json parsed = Json::parse(doc, nullptr, false);
      ASSERT_FALSE(parsed.is_discarded()) << doc;
      EXPECT_EQ(testing::schema_violation(parsed, schema, schema), "") << doc << "\n" << text;
    }
  }
}

TEST(JsonSchema, JsonObjectGrammar) {
  Result<Grammar> g = parse_gbnf(json_object_gbnf());
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  EXPECT_TRUE(accepts(*g, R"({"a": [1, {"b": null}, "c", true], "d": -0.5})"));
  EXPECT_TRUE(accepts(*g, "{}"));
  EXPECT_FALSE(accepts(*g, "[]"));
  EXPECT_FALSE(accepts(*g, R"({"a":})"));
}

TEST(JsonSchema, UnsupportedKeywordsAreNamed) {
  auto message = [](const char* schema) {
    Result<std::string> r = json_schema_to_gbnf(Json::parse(schema));
    return r.ok() ? std::string("ok") : r.error().message();
  };
  EXPECT_NE(message(R"({"type": "string", "format": "date"})").find("`format`"), std::string::npos);
  EXPECT_NE(message(R"({"type": "object", "properties": {"a": {"type": "integer", "minimum": 3}}})")
                .find("`minimum`"),
            std::string::npos);
  EXPECT_NE(message(R"({"oneOf": []})").find("`oneOf`"), std::string::npos);
  EXPECT_NE(message(R"({"type": "date"})").find("`date`"), std::string::npos);
  EXPECT_NE(message(R"({"$ref": "http://x"})").find("$ref"), std::string::npos);
  EXPECT_NE(message(R"({"type": "object", "required": ["z"]})").find("`z`"), std::string::npos);
  EXPECT_NE(message(R"js({"type": "string", "pattern": "(?=a)"})js").find("lookaround"),
            std::string::npos);
  EXPECT_EQ(message(R"({"type": "string", "title": "t", "description": "d"})"), "ok");
}

}  // namespace
}  // namespace keel::grammar

namespace keel::grammar {
namespace {

// Several schemas in one grammar (tool calling): each under its own rule name, the primitives
// added once; every rule a schema makes carries its prefix, so two schemas never clash.
TEST(JsonSchema, RulesOfSeveralSchemasShareOneGrammar) {
  const Json person = Json::parse(kPerson);
  const Json pair = Json::parse(
      R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"enum": ["x"]}},
          "required": ["a", "b"]})");
  Result<std::string> r1 = json_schema_rules(person, "t0");
  Result<std::string> r2 = json_schema_rules(pair, "t1");
  ASSERT_TRUE(r1.ok() && r2.ok());
  for (const auto& [text, prefix] : {std::pair{*r1, "t0"}, std::pair{*r2, "t1"}}) {
    size_t line = 0;
    while (line < text.size()) {
      EXPECT_EQ(text.compare(line, 2, prefix), 0) << text.substr(line, 40);
      line = text.find('\n', line) + 1;
    }
  }
  const std::string gbnf = "root ::= t0 | t1\n" + *r1 + *r2 + std::string(json_primitives_gbnf());
  Result<Grammar> g = parse_gbnf(gbnf);
  ASSERT_TRUE(g.ok()) << g.error().to_string() << "\n" << gbnf;
  EXPECT_TRUE(accepts(*g, R"({"a": 1, "b": "x"})"));
  EXPECT_TRUE(accepts(*g, R"({"age": 3, "name": "bo", "tags": ["a"]})"));
  EXPECT_FALSE(accepts(*g, R"({"a": 1})"));
  EXPECT_FALSE(json_schema_rules(Json{{"type", "string"}, {"format", "date"}}, "t2").ok());
}

}  // namespace
}  // namespace keel::grammar
