// Helpers for the JSON Schema compiler tests: compile a schema to a Grammar, test whether a text
// is accepted, walk a grammar at random (random bytes, then the shortest completion), and check
// that random walks of a schema's grammar validate against the schema (schema_check.h).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/schema_check.h"

namespace keel::grammar::testing {

using OJson = nlohmann::ordered_json;

inline Grammar compile_schema(const OJson& schema) {
  Result<std::string> text = json_schema_to_gbnf(schema);
  EXPECT_TRUE(text.ok()) << text.error().to_string() << "\n" << schema.dump();
  if (!text.ok()) return Grammar{};
  Result<Grammar> g = parse_gbnf(*text);
  EXPECT_TRUE(g.ok()) << g.error().to_string() << "\n" << *text;
  return g.ok() ? std::move(g).value() : Grammar{};
}

inline Grammar compile_schema(const char* json) { return compile_schema(OJson::parse(json)); }

inline bool accepts(const Grammar& g, std::string_view text) {
  StackSet s = initial_state(g);
  return advance(g, text, &s) && s.has_complete();
}

// A random document: `wander` random bytes, then the shortest completion.
inline std::string random_walk(const Grammar& g, std::mt19937& rng, int wander) {
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

// `walks` random documents of `schema` parse and validate.
inline void expect_walks_validate(const OJson& schema, int walks, uint32_t seed = 7) {
  Grammar g = compile_schema(schema);
  std::mt19937 rng(seed);
  for (int i = 0; i < walks; ++i) {
    const std::string doc = random_walk(g, rng, static_cast<int>(rng() % 60));
    const OJson parsed = OJson::parse(doc, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << doc << "\n" << schema.dump();
    EXPECT_EQ(schema_violation(parsed, schema, schema), "") << doc << "\n" << schema.dump();
  }
}

// The message of the error compiling `schema`, or "ok".
inline std::string refusal(const char* schema) {
  Result<std::string> r = json_schema_to_gbnf(OJson::parse(schema));
  return r.ok() ? std::string("ok") : r.error().message();
}

}  // namespace keel::grammar::testing
