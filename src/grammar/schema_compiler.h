// SchemaCompiler: one JSON Schema → GBNF compilation (json_schema.h). It owns the rules written so
// far and the $ref rules, dispatches a schema node on its keywords, and hands keyword families
// to their own files: numbers (schema_numbers.h), strings and formats (schema_strings.cpp,
// schema_formats.h), objects (schema_objects.cpp), arrays (schema_arrays.cpp), and allOf /
// oneOf reasoning (schema_merge.h). Those families call back into expr() for sub-schemas.
// Thread safety: one compilation, one thread.
#pragma once

#include <deque>
#include <map>
#include <string>
#include <string_view>

#include "core/result.h"
#include "grammar/json_schema.h"
#include "grammar/rule_writer.h"

namespace keel::grammar {

class SchemaCompiler {
 public:
  SchemaCompiler(const SchemaJson& root, std::string prefix)
      : root_(root), writer_(std::move(prefix)) {}

  // `top ::= ...` and every rule it needs (not the shared primitives).
  Result<std::string> run(std::string_view top);

  // A GBNF expression for the documents valid under `s`; may add rules.
  Result<std::string> expr(const SchemaJson& s, std::string_view hint);

  // The schema a local reference ("#", "#/$defs/x", any JSON pointer "#/...") names.
  Result<const SchemaJson*> resolve(const std::string& ref) const;

  // Keeps a schema made during compilation (a merged allOf) alive as long as the compiler.
  const SchemaJson& keep(SchemaJson s) { return kept_.emplace_back(std::move(s)); }

  RuleWriter& writer() { return writer_; }

 private:
  Result<std::string> node(const SchemaJson& s, std::string_view hint);
  Result<std::string> typed(const SchemaJson& s, std::string_view type, std::string_view hint);
  Result<std::string> ref_rule(const SchemaJson& s);
  Result<std::string> alternatives(const SchemaJson& s, const char* key, std::string_view hint);
  Result<std::string> values(const SchemaJson& s);

  const SchemaJson& root_;
  RuleWriter writer_;
  std::map<std::string, std::string> refs_;  // $ref → its rule
  std::deque<SchemaJson> kept_;              // stable addresses
  int depth_ = 0;                            // nested expr() calls (bounded)
};

// The keyword families (each in its own file).
Result<std::string> string_expr(SchemaCompiler& c, const SchemaJson& s);
Result<std::string> object_expr(SchemaCompiler& c, const SchemaJson& s);
Result<std::string> array_expr(SchemaCompiler& c, const SchemaJson& s);

// Shared checks.
Result<int64_t> count_keyword(const SchemaJson& s, const char* key, int64_t dflt);
Status unsupported(std::string_view keyword, std::string_view why = "");

}  // namespace keel::grammar
