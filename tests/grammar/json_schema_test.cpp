// JSON Schema → grammar: documents the schema allows are accepted (properties in the declared
// order), others refused; random walks through each grammar give documents that parse and
// validate (schema_check.h); keywords keel cannot honour are refused by name, annotations and
// unknown keywords ignored.
#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include "grammar/schema_test_util.h"

namespace keel::grammar {
namespace {

using testing::accepts;
using testing::compile_schema;
using testing::OJson;
using testing::refusal;

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
  Grammar g = compile_schema(kPerson);
  // Properties come in the order the schema declares them.
  EXPECT_TRUE(accepts(g, R"({"name":"bo","age":3,"tags":["a"]})"));
  EXPECT_TRUE(accepts(g, R"({ "name": "bo", "age": -30, "tags": ["a", 3], "score": 1.5e3 })"));
  EXPECT_TRUE(accepts(g, R"({"name":"é\"x","age":0,"tags":["b"],"nick":null})"));
  EXPECT_FALSE(accepts(g, R"({"age":3,"name":"bo","tags":["a"]})"));         // another order
  EXPECT_FALSE(accepts(g, R"({"name":"bo","tags":["a"]})"));                 // age missing
  EXPECT_FALSE(accepts(g, R"({"name":"bo","age":3,"tags":[]})"));            // minItems
  EXPECT_FALSE(accepts(g, R"({"name":"bo","age":3,"tags":["c"]})"));         // enum
  EXPECT_FALSE(accepts(g, R"({"name":"123456789","age":3,"tags":["a"]})"));  // maxLength
  EXPECT_FALSE(accepts(g, R"({"name":"bo","age":3.5,"tags":["a"]})"));       // integer
  EXPECT_FALSE(accepts(g, R"({"name":"bo","age":3,"tags":["a"],"x":1})"));   // additional
  EXPECT_FALSE(accepts(g, R"({"name":"bo","age":01,"tags":["a"]})"));        // leading zero
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
  for (const char* text : schemas) testing::expect_walks_validate(OJson::parse(text), 40);
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
  EXPECT_NE(refusal(R"({"not": {"type": "string"}})").find("`not`"), std::string::npos);
  EXPECT_NE(refusal(R"({"type": "array", "contains": {"type": "integer"}})").find("`contains`"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type": "object", "if": {}, "then": {}})").find("`if`"), std::string::npos);
  EXPECT_NE(refusal(R"({"type": "array", "uniqueItems": true, "items": {"type": "string"}})")
                .find("`uniqueItems`"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type": "string", "format": "uri-template"})").find("`format`"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type": "integer", "multipleOf": 101})").find("`multipleOf`"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"oneOf": []})").find("`oneOf`"), std::string::npos);
  EXPECT_NE(refusal(R"({"type": "date"})").find("`date`"), std::string::npos);
  EXPECT_NE(refusal(R"({"$ref": "http://x"})").find("$ref"), std::string::npos);
  EXPECT_NE(refusal(R"({"$ref": "#/prefixItems/99999999999999999999", "prefixItems": [{}]})")
                .find("$ref"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type": "object", "required": ["z"], "additionalProperties": false})")
                .find("`z`"),
            std::string::npos);
  EXPECT_NE(refusal(R"js({"type": "string", "pattern": "a(?=b)"})js").find("lookaround"),
            std::string::npos);
  // Annotations, unknown keywords and unknown formats are ignored.
  EXPECT_EQ(refusal(R"({"type": "string", "title": "t", "description": "d", "examples": ["x"],
                        "x-order": 1, "readOnly": true, "format": "password"})"),
            "ok");
}

TEST(JsonSchema, PropertiesKeepTheDeclaredOrder) {
  Grammar g = compile_schema(
      R"({"type": "object", "properties": {"zeta": {"type": "integer"}, "alpha": {"type": "string"},
          "mid": {"type": "boolean"}}, "required": ["zeta", "alpha", "mid"]})");
  EXPECT_TRUE(accepts(g, R"({"zeta":1,"alpha":"a","mid":true})"));
  EXPECT_FALSE(accepts(g, R"({"alpha":"a","mid":true,"zeta":1})"));
  // A required property that is not declared comes after the declared ones.
  Grammar r = compile_schema(
      R"({"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["z", "b"]})");
  EXPECT_TRUE(accepts(r, R"({"b":1,"z":[null]})"));
  EXPECT_FALSE(accepts(r, R"({"b":1})"));
}

// Several schemas in one grammar (tool calling): each under its own rule name, the primitives
// added once; every rule a schema makes carries its prefix, so two schemas never clash.
TEST(JsonSchema, RulesOfSeveralSchemasShareOneGrammar) {
  const OJson person = OJson::parse(kPerson);
  const OJson pair = OJson::parse(
      R"({"type": "object", "properties": {"a": {"type": "integer", "minimum": 2},
          "b": {"type": "string", "format": "date"}}, "required": ["a", "b"]})");
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
  EXPECT_TRUE(accepts(*g, R"({"a": 2, "b": "2024-02-29"})"));
  EXPECT_FALSE(accepts(*g, R"({"a": 1, "b": "2024-02-29"})"));
  EXPECT_TRUE(accepts(*g, R"({"name": "bo", "age": 3, "tags": ["a"]})"));
  EXPECT_FALSE(accepts(*g, R"({"a": 2})"));
  EXPECT_FALSE(json_schema_rules(OJson{{"type", "string"}, {"format", "regex"}}, "t2").ok());
}

}  // namespace
}  // namespace keel::grammar
