// Every JSON Schema keyword keel enforces, sampled through the engine with a real model: per
// keyword a small schema, seeded samples at temperature 1 (stories260K, which knows nothing of
// JSON), batched; every sample must finish with `stop` (0 truncated), parse, and validate
// (grammar/schema_check.h, written apart from the compiler; objects keep the declared order).
// The grammar is the only thing that makes the outputs valid: nothing is checked and retried.
// In the suite 50 samples per keyword (time under ASan); bench/schema_keywords.sh runs 200 on
// stories260K and the built-in random model and validates them with ajv. Environment:
//   KEEL_SCHEMA_SAMPLES   samples per keyword (default 50)
//   KEEL_SCHEMA_MODEL     a GGUF model instead of stories260K (e.g. the built-in random model)
//   KEEL_SCHEMA_OUT       a file to write {"keyword", "schema", "output", "finish"} lines to
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "engine_test_util.h"
#include "grammar/json_schema.h"
#include "grammar/schema_check.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"

namespace keel::engine {
namespace {

using OJson = nlohmann::ordered_json;

struct Keyword {
  const char* name;
  const char* schema;
};

const Keyword kKeywords[] = {
    {"minimum/maximum", R"({"type": "integer", "minimum": -50, "maximum": 1200})"},
    {"exclusive integer", R"({"type": "integer", "exclusiveMinimum": 3, "exclusiveMaximum": 17})"},
    {"number bounds", R"({"type": "number", "minimum": -1.5, "maximum": 2.25})"},
    {"exclusive number", R"({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})"},
    {"multipleOf integer", R"({"type": "integer", "multipleOf": 7, "minimum": 0, "maximum": 500})"},
    {"multipleOf 0.25", R"({"type": "number", "multipleOf": 0.25})"},
    {"multipleOf 0.01", R"({"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 100})"},
    {"format date", R"({"type": "string", "format": "date"})"},
    {"format time", R"({"type": "string", "format": "time"})"},
    {"format date-time", R"({"type": "string", "format": "date-time"})"},
    {"format duration", R"({"type": "string", "format": "duration"})"},
    {"format uuid", R"({"type": "string", "format": "uuid"})"},
    {"format email", R"({"type": "string", "format": "email"})"},
    {"format hostname", R"({"type": "string", "format": "hostname"})"},
    {"format ipv4", R"({"type": "string", "format": "ipv4"})"},
    {"format ipv6", R"({"type": "string", "format": "ipv6"})"},
    {"format uri", R"({"type": "string", "format": "uri", "minLength": 1, "maxLength": 2083})"},
    {"allOf", R"({"allOf": [{"type": "object", "properties": {"a": {"type": "integer",
        "minimum": 0}}, "required": ["a"]}, {"properties": {"a": {"maximum": 9},
        "b": {"type": "boolean"}}, "required": ["b"]}]})"},
    {"oneOf", R"({"oneOf": [{"type": "object", "properties": {"kind": {"const": "cat"},
        "lives": {"type": "integer", "minimum": 1, "maximum": 9}}, "required": ["kind", "lives"]},
        {"type": "object", "properties": {"kind": {"const": "dog"}, "good": {"type": "boolean"}},
        "required": ["kind", "good"]}]})"},
    {"min/maxProperties", R"({"type": "object", "additionalProperties": {"type": "integer"},
        "minProperties": 1, "maxProperties": 3})"},
    {"propertyNames", R"({"type": "object", "propertyNames": {"pattern": "^[a-z]{1,6}$"},
        "additionalProperties": {"type": "boolean"}, "maxProperties": 4})"},
    {"patternProperties", R"({"type": "object", "patternProperties": {"^x-[a-z]{1,8}$":
        {"type": "string", "maxLength": 10}}, "additionalProperties": false})"},
    {"additionalProperties schema", R"({"type": "object", "properties": {"id": {"type":
        "integer"}}, "required": ["id"], "additionalProperties": {"type": "string",
        "format": "date"}, "maxProperties": 3})"},
    {"$ref definitions", R"({"definitions": {"p": {"type": "object", "properties": {"x":
        {"type": "number", "minimum": 0}}, "required": ["x"]}}, "type": "array",
        "items": {"$ref": "#/definitions/p"}, "maxItems": 3})"},
    {"recursive $ref", R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type":
        "integer", "minimum": 0, "maximum": 99}, "kids": {"type": "array", "items":
        {"$ref": "#/$defs/node"}, "maxItems": 2}}, "required": ["v", "kids"]}},
        "$ref": "#/$defs/node"})"},
    {"prefixItems", R"({"type": "array", "prefixItems": [{"type": "string", "format": "date"},
        {"type": "integer", "minimum": 1}], "items": false, "minItems": 2})"},
    {"property order", R"({"type": "object", "properties": {"zeta": {"type": "integer"},
        "alpha": {"type": "boolean"}, "mid": {"type": "null"}},
        "required": ["zeta", "alpha", "mid"], "additionalProperties": false})"},
};

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : dflt;
}

// The keys of an object output in the order written.
bool declared_order(const OJson& doc, const OJson& schema) {
  std::vector<std::string> declared;
  for (const auto& [k, v] : schema["properties"].items()) declared.push_back(k);
  size_t at = 0;
  for (const auto& [k, v] : doc.items()) {
    while (at < declared.size() && declared[at] != k) ++at;
    if (at == declared.size()) return false;
  }
  return true;
}

TEST(EngineSchemaKeywordsTest, EveryKeywordValidatesAtTemperatureOne) {
  KEEL_REQUIRE_SHARED();
  const char* model_env = std::getenv("KEEL_SCHEMA_MODEL");
  auto opened = model::Model::open(
      model_env != nullptr ? std::string(model_env)
                           : testing::shared_path("models/stories260K/stories260K.gguf"));
  ASSERT_TRUE(opened.ok()) << opened.error().to_string();
  auto tok = tokenizer::Tokenizer::from_gguf((*opened)->file());
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  EngineConfig config = base_config();
  config.eog_token_ids.assign(tok->eog_ids().begin(), tok->eog_ids().end());
  config.scheduler.max_num_seqs = 64;
  config.scheduler.max_batched_tokens = 1024;
  auto e = Engine::start(**opened, config, EngineDeps{.tokenizer = &*tok});
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  const int samples = env_int("KEEL_SCHEMA_SAMPLES", 50);
  const char* out_path = std::getenv("KEEL_SCHEMA_OUT");
  std::ofstream out;
  if (out_path != nullptr) out.open(out_path);
  const std::vector<int32_t> prompt = tok->encode("Once upon a time", true, false);
  int total_bad = 0, total_truncated = 0;
  for (const Keyword& kw : kKeywords) {
    const OJson schema = OJson::parse(kw.schema);
    Result<std::string> gbnf = grammar::json_schema_to_gbnf(schema);
    ASSERT_TRUE(gbnf.ok()) << kw.name << ": " << gbnf.error().to_string();
    std::vector<std::shared_ptr<CollectingSink>> sinks;
    for (int i = 0; i < samples; ++i) {
      GenerationRequest r;
      r.prompt_tokens = prompt;
      r.max_tokens = 256;
      r.sampling.temperature = 1.0f;
      r.sampling.seed = 1000 + static_cast<uint64_t>(i);
      r.grammar = *gbnf;
      sinks.push_back(std::make_shared<CollectingSink>());
      auto key = (*e)->submit(std::move(r), sinks.back());
      ASSERT_TRUE(key.ok()) << key.error().to_string();
    }
    int valid = 0, truncated = 0;
    for (auto& sink : sinks) {
      const std::vector<int32_t> tokens = sink->wait(300000);
      tokenizer::IncrementalDecoder decoder(*tok, false, tokenizer::DecodePosition::kContinuation);
      std::string text;
      for (int32_t t : tokens) {
        if (!tok->is_eog(t)) text += decoder.push(t);
      }
      text += decoder.finish();
      const bool stopped = sink->finish() == FinishReason::kStop;
      truncated += stopped ? 0 : 1;
      const OJson doc = OJson::parse(text, nullptr, false);
      std::string why = doc.is_discarded()
                            ? "does not parse"
                            : grammar::testing::schema_violation(doc, schema, schema);
      if (why.empty() && std::string_view(kw.name) == "property order" &&
          !declared_order(doc, schema)) {
        why = "keys out of the declared order";
      }
      if (why.empty() && stopped) {
        ++valid;
      } else {
        ADD_FAILURE() << kw.name << ": " << (stopped ? why : "truncated") << "\n" << text;
      }
      if (out.is_open()) {
        out << OJson{{"keyword", kw.name},
                     {"schema", schema},
                     {"output", text},
                     {"finish", stopped ? "stop" : "length"}}
                   .dump(-1, ' ', false, OJson::error_handler_t::replace)
            << "\n";
      }
    }
    std::printf("[ keywords ] %-28s %d/%d valid, %d truncated\n", kw.name, valid, samples,
                truncated);
    total_bad += samples - valid;
    total_truncated += truncated;
  }
  std::printf("[ keywords ] %zu keywords x %d samples: %d invalid or truncated (%d truncated)\n",
              std::size(kKeywords), samples, total_bad, total_truncated);
  EXPECT_EQ(total_bad, 0);
}

}  // namespace
}  // namespace keel::engine
