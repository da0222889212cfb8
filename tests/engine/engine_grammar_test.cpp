// Structured outputs through the engine with a real model (stories260K, which knows nothing of
// JSON): 50 generated JSON Schemas, sampled at temperature 1 in one batch with max_tokens 200 —
// every output that finishes with `stop` must parse and validate against its schema
// (grammar/schema_check.h, written apart from the compiler), and at least 98 % must finish with
// `stop` (the budget-aware closing); truncated outputs are counted and printed. Also: a regex and
// a GBNF grammar, and the engine refusing bad grammars.
#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "engine_test_util.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "grammar/schema_check.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"

namespace keel::engine {
namespace {

using Json = nlohmann::json;

// A random schema from the supported subset (depth-limited).
Json random_schema(std::mt19937& rng, int depth) {
  const int kind = static_cast<int>(rng() % (depth > 0 ? 10 : 7));
  switch (kind) {
    case 0:
      return {{"type", "integer"}};
    case 1:
      return {{"type", "number"}};
    case 2:
      return {{"type", "boolean"}};
    case 3: {
      Json s = {{"type", "string"}};
      if (rng() % 2) s["maxLength"] = rng() % 12;
      if (rng() % 3 == 0) s["minLength"] = 1;
      return s;
    }
    case 4:
      return {{"enum", Json::array({"red", "green", 7, nullptr})}};
    case 5:
      return {{"type", Json::array({"string", "null"})}};
    case 6:
      return {{"type", "string"}, {"pattern", "^[a-z]{2,5}-\\d{1,3}$"}};
    case 7: {
      Json s = {{"type", "array"}, {"items", random_schema(rng, depth - 1)}};
      if (rng() % 2) s["minItems"] = 1;
      if (rng() % 2) s["maxItems"] = 1 + rng() % 4;
      return s;
    }
    case 8:
      return {{"anyOf", Json::array({random_schema(rng, depth - 1), random_schema(rng, 0)})}};
    default: {
      Json props = Json::object();
      Json required = Json::array();
      const int n = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) {
        const std::string name = std::string("field_") + static_cast<char>('a' + i);
        props[name] = random_schema(rng, depth - 1);
        if (rng() % 3 != 0) required.push_back(name);
      }
      return {{"type", "object"},
              {"properties", props},
              {"required", required},
              {"additionalProperties", false}};
    }
  }
}

struct Outcome {
  std::string text;
  std::optional<FinishReason> finish;
};

// Runs all requests at once (batched); returns each one's text (as the server renders it).
std::vector<Outcome> run_all(Engine& engine, const tokenizer::Tokenizer& tok,
                             const std::vector<GenerationRequest>& requests) {
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (const GenerationRequest& r : requests) {
    sinks.push_back(std::make_shared<CollectingSink>());
    auto key = engine.submit(r, sinks.back());
    EXPECT_TRUE(key.ok()) << key.error().to_string();
  }
  std::vector<Outcome> out;
  for (auto& sink : sinks) {
    const std::vector<int32_t> tokens = sink->wait(120000);
    tokenizer::IncrementalDecoder decoder(tok, false, tokenizer::DecodePosition::kContinuation);
    Outcome o;
    for (int32_t t : tokens) {
      if (!tok.is_eog(t)) o.text += decoder.push(t);
    }
    o.text += decoder.finish();
    o.finish = sink->finish();
    out.push_back(std::move(o));
  }
  return out;
}

GenerationRequest sampled(const std::vector<int32_t>& prompt, std::string grammar, uint64_t seed,
                          int32_t max_tokens) {
  GenerationRequest r;
  r.prompt_tokens = prompt;
  r.max_tokens = max_tokens;
  r.sampling.temperature = 1.0f;
  r.sampling.seed = seed;
  r.grammar = std::move(grammar);
  return r;
}

TEST(EngineGrammarTest, FiftySchemasStopAndValidate) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  auto tok = tokenizer::Tokenizer::from_gguf(model->file());
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  auto e = Engine::start(*model, base_config(), EngineDeps{.tokenizer = &*tok});
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  const std::vector<int32_t> prompt = tok->encode("Once upon a time", true, false);

  std::mt19937 rng(2026);
  std::vector<Json> schemas;
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 50; ++i) {
    schemas.push_back(i % 5 == 0 ? random_schema(rng, 1) : random_schema(rng, 3));
    if (i % 7 == 0)
      schemas.back() = {
          {"type", "object"}, {"properties", {{"x", schemas.back()}}}, {"required", {"x"}}};
    Result<std::string> gbnf = grammar::json_schema_to_gbnf(schemas.back());
    ASSERT_TRUE(gbnf.ok()) << gbnf.error().to_string() << "\n" << schemas.back().dump();
    requests.push_back(sampled(prompt, std::move(gbnf).value(), 100 + i, 200));
  }
  const std::vector<Outcome> outs = run_all(**e, *tok, requests);
  int stops = 0, truncated = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    ASSERT_TRUE(outs[i].finish.has_value());
    if (*outs[i].finish != FinishReason::kStop) {
      ++truncated;
      ADD_FAILURE() << "not stopped (" << finish_reason_name(*outs[i].finish) << "): schema "
                    << schemas[i].dump() << "\noutput " << outs[i].text;
      continue;
    }
    ++stops;
    const Json doc = Json::parse(outs[i].text, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << "does not parse: " << outs[i].text;
    EXPECT_EQ(grammar::testing::schema_violation(doc, schemas[i], schemas[i]), "")
        << schemas[i].dump() << "\n"
        << outs[i].text;
  }
  size_t longest = 0, bytes = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    bytes += outs[i].text.size();
    if (outs[i].text.size() > outs[longest].text.size()) longest = i;
  }
  std::printf("[ grammar ] %d/50 finished with stop, %d truncated; %zu bytes in all; longest: %s\n",
              stops, truncated, bytes, outs[longest].text.c_str());
  EXPECT_GE(stops, 49);  // ≥ 98 %
}

TEST(EngineGrammarTest, RegexAndGbnfAndTightBudgets) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  auto tok = tokenizer::Tokenizer::from_gguf(model->file());
  ASSERT_TRUE(tok.ok());
  auto e = Engine::start(*model, base_config(), EngineDeps{.tokenizer = &*tok});
  ASSERT_TRUE(e.ok());
  const std::vector<int32_t> prompt = tok->encode("Once upon a time", true, false);
  Result<std::string> re = grammar::regex_grammar(R"([A-Z][a-z]{1,8}( [a-z]{1,8}){0,5}\.)");
  ASSERT_TRUE(re.ok());
  const std::string gbnf = R"(root ::= "Answer: " ("yes" | "no") ", because " [a-z ]{3,40} ".")";
  std::vector<GenerationRequest> requests;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    requests.push_back(sampled(prompt, *re, seed, 60));
    requests.push_back(sampled(prompt, gbnf, seed, 60));
    // A budget just big enough: the budget-aware closing must still finish with stop.
    requests.push_back(sampled(prompt, grammar::json_object_gbnf(), seed, 3 + seed));
  }
  const std::vector<Outcome> outs = run_all(**e, *tok, requests);
  const std::regex full_re(R"([A-Z][a-z]{1,8}( [a-z]{1,8}){0,5}\.)");
  const std::regex full_gbnf(R"(Answer: (yes|no), because [a-z ]{3,40}\.)");
  for (size_t i = 0; i < outs.size(); ++i) {
    EXPECT_EQ(outs[i].finish, FinishReason::kStop) << i << ": " << outs[i].text;
    bool ok = false;
    if (i % 3 == 0) ok = std::regex_match(outs[i].text, full_re);
    if (i % 3 == 1) ok = std::regex_match(outs[i].text, full_gbnf);
    if (i % 3 == 2) ok = Json::parse(outs[i].text, nullptr, false).is_object();
    EXPECT_TRUE(ok) << i << ": " << outs[i].text;
  }
}

TEST(EngineGrammarTest, RefusesBadGrammars) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  auto tok = tokenizer::Tokenizer::from_gguf(model->file());
  ASSERT_TRUE(tok.ok());
  auto e = Engine::start(*model, base_config(), EngineDeps{.tokenizer = &*tok});
  ASSERT_TRUE(e.ok());
  GenerationRequest r = sampled({1, 403}, "root ::= nowhere", 1, 10);
  EXPECT_EQ((*e)->submit(r, std::make_shared<CollectingSink>()).error().code(),
            StatusCode::kInvalidArgument);
  auto plain = Engine::start(*model, base_config());
  ASSERT_TRUE(plain.ok());
  r.grammar = "root ::= \"a\"";
  EXPECT_EQ((*plain)->submit(r, std::make_shared<CollectingSink>()).error().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace keel::engine
