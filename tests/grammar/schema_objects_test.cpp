// Object, array and combining keywords as grammar: additionalProperties as a schema (keys never
// a declared name), patternProperties, propertyNames, minProperties / maxProperties, prefixItems
// and draft-7 tuples, allOf merging, oneOf as anyOf when disjoint, $ref to any local pointer,
// OpenAPI nullable — accepted / rejected examples, random walks, refusals.
#include <gtest/gtest.h>

#include "grammar/schema_test_util.h"

namespace keel::grammar {
namespace {

using testing::accepts;
using testing::compile_schema;
using testing::OJson;
using testing::refusal;

TEST(SchemaObjects, AdditionalPropertiesAsASchema) {
  Grammar g = compile_schema(R"({"type": "object", "properties": {"a": {"type": "boolean"}},
      "additionalProperties": {"type": "integer", "minimum": 0}})");
  EXPECT_TRUE(accepts(g, R"({"a":true,"b":1,"ab":2})"));
  EXPECT_TRUE(accepts(g, R"({"zz":3})"));
  EXPECT_FALSE(accepts(g, R"({"a":true,"a":1})"));  // an extra never repeats a declared name
  EXPECT_FALSE(accepts(g, R"({"b":-1})"));
  EXPECT_FALSE(accepts(g, R"({"b":1,"a":true})"));  // declared properties come first
  Grammar dict = compile_schema(R"({"type": "object", "additionalProperties": {"type": "string"},
      "minProperties": 1, "maxProperties": 2})");
  EXPECT_FALSE(accepts(dict, "{}"));
  EXPECT_TRUE(accepts(dict, R"({"x":"1"})"));
  EXPECT_TRUE(accepts(dict, R"({"x":"1","y":"2"})"));
  EXPECT_FALSE(accepts(dict, R"({"x":"1","y":"2","z":"3"})"));
}

TEST(SchemaObjects, PatternPropertiesAndPropertyNames) {
  Grammar p = compile_schema(R"({"type": "object", "patternProperties": {"^x-[a-z]+$":
      {"type": "integer"}}, "additionalProperties": false})");
  EXPECT_TRUE(accepts(p, R"({"x-ab":1,"x-c":2})"));
  EXPECT_FALSE(accepts(p, R"({"y":1})"));
  Grammar n = compile_schema(R"({"type": "object", "propertyNames": {"maxLength": 2},
      "additionalProperties": {"type": "null"}})");
  EXPECT_TRUE(accepts(n, R"({"ab":null})"));
  EXPECT_FALSE(accepts(n, R"({"abc":null})"));
  // Declared names propertyNames rejects are dropped (a required one is refused).
  Grammar d = compile_schema(R"({"type": "object", "properties": {"ok": {"type": "integer"},
      "toolong": {"type": "integer"}}, "propertyNames": {"maxLength": 3}})");
  EXPECT_TRUE(accepts(d, R"({"ok":1})"));
  EXPECT_FALSE(accepts(d, R"({"ok":1,"toolong":2})"));
  EXPECT_NE(refusal(R"({"type": "object", "properties": {"toolong": {}}, "required": ["toolong"],
      "propertyNames": {"maxLength": 3}})")
                .find("propertyNames"),
            std::string::npos);
}

TEST(SchemaObjects, PropertyCounts) {
  Grammar g = compile_schema(R"({"type": "object", "properties": {"a": {"type": "integer"},
      "b": {"type": "integer"}, "c": {"type": "integer"}}, "minProperties": 2, "maxProperties": 2})");
  EXPECT_TRUE(accepts(g, R"({"a":1,"c":3})"));
  EXPECT_FALSE(accepts(g, R"({"a":1})"));
  EXPECT_FALSE(accepts(g, R"({"a":1,"b":2,"c":3})"));
  EXPECT_NE(refusal(R"({"type": "object", "additionalProperties": {"type": "integer"},
      "minProperties": 2})")
                .find("`minProperties`"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type": "object", "properties": {"a": {}}, "minProperties": 2})")
                .find("`minProperties`"),
            std::string::npos);
}

TEST(SchemaObjects, TuplesAndPrefixItems) {
  Grammar g = compile_schema(R"({"type": "array", "prefixItems": [{"type": "integer"},
      {"type": "string"}], "items": false, "minItems": 1})");
  EXPECT_TRUE(accepts(g, R"([1])"));
  EXPECT_TRUE(accepts(g, R"([1,"a"])"));
  EXPECT_FALSE(accepts(g, R"([])"));
  EXPECT_FALSE(accepts(g, R"(["a"])"));
  EXPECT_FALSE(accepts(g, R"([1,"a",2])"));
  Grammar d7 = compile_schema(R"({"type": "array", "items": [{"type": "boolean"}],
      "additionalItems": {"type": "null"}, "maxItems": 3})");
  EXPECT_TRUE(accepts(d7, R"([true,null,null])"));
  EXPECT_FALSE(accepts(d7, R"([true,null,null,null])"));
  EXPECT_FALSE(accepts(d7, R"([null])"));
}

// Sets of enum values (pydantic Set[Enum], zod z.set(z.enum(...))): distinct items in order.
TEST(SchemaObjects, UniqueItemsFromFiniteValues) {
  Grammar g = compile_schema(R"({"type": "array", "uniqueItems": true, "minItems": 1,
      "items": {"$ref": "#/$defs/c"}, "$defs": {"c": {"enum": ["red", "green", "blue"]}}})");
  EXPECT_TRUE(accepts(g, R"(["red","blue"])"));
  EXPECT_TRUE(accepts(g, R"(["green"])"));
  EXPECT_FALSE(accepts(g, R"([])"));
  EXPECT_FALSE(accepts(g, R"(["red","red"])"));
  EXPECT_FALSE(accepts(g, R"(["blue","red"])"));  // listed order only: a valid subset
  Grammar b = compile_schema(R"({"type": "array", "uniqueItems": true, "items": {"type": "boolean"},
      "maxItems": 2})");
  EXPECT_TRUE(accepts(b, "[false,true]"));
  EXPECT_FALSE(accepts(b, "[true,true]"));
  testing::expect_walks_validate(OJson::parse(R"({"type": "array", "uniqueItems": true,
      "items": {"type": "integer", "enum": [1, 2, 3, "x"]}, "minItems": 2})"),
                                 40);
}

TEST(SchemaObjects, AllOfMerges) {
  Grammar g = compile_schema(R"({"allOf": [
      {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}, "required": ["a"]},
      {"properties": {"b": {"type": "string"}, "a": {"maximum": 9}}, "required": ["b"]}]})");
  EXPECT_TRUE(accepts(g, R"({"a":9,"b":"x"})"));
  EXPECT_FALSE(accepts(g, R"({"a":10,"b":"x"})"));
  EXPECT_FALSE(accepts(g, R"({"a":1})"));
  // additionalProperties false in one part forbids the other part's extra names.
  Grammar closed = compile_schema(R"({"allOf": [
      {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false},
      {"properties": {"b": {"type": "integer"}}}]})");
  EXPECT_TRUE(accepts(closed, R"({"a":1})"));
  EXPECT_FALSE(accepts(closed, R"({"a":1,"b":2})"));
  EXPECT_NE(refusal(R"({"allOf": [{"type": "string", "pattern": "^a"},
      {"type": "string", "pattern": "^b"}]})")
                .find("`pattern`"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"allOf": [{"type": "string"}, {"type": "integer"}]})").find("`type`"),
            std::string::npos);
}

TEST(SchemaObjects, OneOfOnlyWhenDisjoint) {
  Grammar g = compile_schema(R"({"oneOf": [
      {"type": "object", "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer"}},
       "required": ["kind"]},
      {"type": "object", "properties": {"kind": {"const": "dog"}}, "required": ["kind"]}]})");
  EXPECT_TRUE(accepts(g, R"({"kind":"cat","lives":9})"));
  EXPECT_TRUE(accepts(g, R"({"kind":"dog"})"));
  EXPECT_FALSE(accepts(g, R"({"kind":"cow"})"));
  EXPECT_EQ(refusal(R"({"oneOf": [{"type": "string"}, {"type": "integer"}, {"enum": [null]}]})"),
            "ok");
  EXPECT_NE(refusal(R"({"oneOf": [{"type": "number"}, {"type": "integer"}]})").find("`oneOf`"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"oneOf": [{"type": "object"}, {"type": "object",
      "properties": {"a": {}}}]})")
                .find("`oneOf`"),
            std::string::npos);
}

TEST(SchemaObjects, RefsNullableAndWalks) {
  Grammar r = compile_schema(R"({"type": "object", "properties": {"a": {"type": "string",
      "maxLength": 2}, "b": {"$ref": "#/properties/a"}}, "required": ["a", "b"]})");
  EXPECT_TRUE(accepts(r, R"({"a":"x","b":"yz"})"));
  EXPECT_FALSE(accepts(r, R"({"a":"x","b":"xyz"})"));
  Grammar n = compile_schema(R"({"type": "integer", "nullable": true, "minimum": 1})");
  EXPECT_TRUE(accepts(n, "null"));
  EXPECT_TRUE(accepts(n, "3"));
  EXPECT_FALSE(accepts(n, "0"));
  const char* schemas[] = {
      R"({"definitions": {"n": {"type": "object", "properties": {"v": {"type": "integer"},
          "next": {"anyOf": [{"$ref": "#/definitions/n"}, {"type": "null"}]}},
          "required": ["v", "next"]}}, "$ref": "#/definitions/n"})",
      R"({"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}},
          "required": ["id"], "additionalProperties": {"type": "number", "minimum": 0, "maximum": 1},
          "maxProperties": 3})",
      R"({"type": "array", "prefixItems": [{"type": "string", "format": "date"},
          {"type": "integer", "multipleOf": 3}], "items": {"type": "boolean"}, "maxItems": 4})",
      R"({"$ref": "#/$defs/x", "maximum": 5, "$defs": {"x": {"type": "integer", "minimum": 3}}})",
      R"({"type": "object", "patternProperties": {"^[a-c]{1,3}$": {"type": "string", "format": "ipv4"}},
          "minProperties": 1})",
      R"({"anyOf": [{"type": "string", "format": "email"}, {"type": "null"}], "title": "x"})",
  };
  for (const char* text : schemas) testing::expect_walks_validate(OJson::parse(text), 40);
}

}  // namespace
}  // namespace keel::grammar
