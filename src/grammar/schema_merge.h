// allOf and oneOf as grammar: allOf is merged into one schema valid exactly where every part is
// (types intersected, bounds tightened, enum/const values intersected, properties combined with
// each part's additionalProperties / patternProperties applying to the other's names, required
// united; sub-schemas of the same name become a nested allOf, merged when compiled). Parts that
// cannot be merged exactly — two different patterns or formats, multipleOfs that do not divide,
// anyOf in two parts, patternProperties with another part's additionalProperties — are refused
// naming the keyword. oneOf compiles as anyOf only when its branches provably cannot overlap.
// Thread safety: pure functions (reading the compiler's root for $ref).
#pragma once

#include "core/result.h"
#include "grammar/schema_compiler.h"

namespace keel::grammar {

// `s` (an object with `allOf`) merged into one schema without allOf at its top.
Result<SchemaJson> merge_all_of(const SchemaCompiler& c, const SchemaJson& s);

// `s` with a top-level $ref replaced by its target (merged with the siblings), and a top-level
// allOf merged; boolean schemas become {} (true) or an error (false).
Result<SchemaJson> deref(const SchemaCompiler& c, const SchemaJson& s);

// True only when no JSON value is valid under both (conservative: false when unsure).
bool provably_disjoint(const SchemaCompiler& c, const SchemaJson& a, const SchemaJson& b);

// Title, description, examples, x-..., unknown keywords: ignored by the compiler.
bool is_annotation(std::string_view key);

}  // namespace keel::grammar
