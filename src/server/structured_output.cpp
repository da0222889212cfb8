// Structured-output request fields → GBNF (structured_output.h).
#include "server/structured_output.h"

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace keel::server {
namespace {

using Json = nlohmann::json;

MaybeError from_response_format(const Json& rf, std::string* grammar) {
  const Json* type = rf.is_object() ? field(rf, "type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    return ApiError::bad_request("`response_format` must be an object with a string `type`",
                                 "response_format");
  }
  const std::string t = type->get<std::string>();
  if (t == "text") return std::nullopt;
  if (t == "json_object") {
    *grammar = grammar::json_object_gbnf();
    return std::nullopt;
  }
  if (t != "json_schema") {
    return ApiError::bad_request(
        "`response_format.type` must be \"text\", \"json_object\" or "
        "\"json_schema\"",
        "response_format.type", "unsupported_value");
  }
  const Json* js = field(rf, "json_schema");
  if (js == nullptr || !js->is_object()) {
    return ApiError::bad_request("`response_format.json_schema` must be an object",
                                 "response_format.json_schema");
  }
  if (const Json* name = field(*js, "name"); name != nullptr && !name->is_string()) {
    return ApiError::bad_request("`response_format.json_schema.name` must be a string",
                                 "response_format.json_schema.name");
  }
  if (const Json* strict = field(*js, "strict"); strict != nullptr && !strict->is_boolean()) {
    return ApiError::bad_request("`response_format.json_schema.strict` must be a boolean",
                                 "response_format.json_schema.strict");
  }
  const Json* schema = field(*js, "schema");
  if (schema == nullptr || !(schema->is_object() || schema->is_boolean())) {
    return ApiError::bad_request("`response_format.json_schema.schema` must be a JSON Schema",
                                 "response_format.json_schema.schema");
  }
  Result<std::string> gbnf = grammar::json_schema_to_gbnf(*schema);
  if (!gbnf.ok()) {
    return ApiError::bad_request(gbnf.error().message(), "response_format.json_schema.schema",
                                 "unsupported_value");
  }
  *grammar = std::move(gbnf).value();
  return std::nullopt;
}

}  // namespace

MaybeError parse_structured_output(const Json& body, std::string* grammar) {
  grammar->clear();
  std::optional<std::string> gbnf, regex;
  KEEL_API_TRY(read_string(body, "grammar", &gbnf));
  KEEL_API_TRY(read_string(body, "regex", &regex));
  const Json* rf = field(body, "response_format");
  const bool structured_rf =
      rf != nullptr && !(rf->is_object() && rf->contains("type") && (*rf)["type"] == "text");
  if (int(gbnf.has_value()) + int(regex.has_value()) + int(structured_rf) > 1) {
    return ApiError::bad_request(
        "give at most one of `response_format` (json), `grammar` and "
        "`regex`",
        "grammar");
  }
  const char* param = "grammar";
  if (rf != nullptr) {
    KEEL_API_TRY(from_response_format(*rf, grammar));
    param = "response_format";
  } else if (gbnf) {
    *grammar = std::move(*gbnf);
  } else if (regex) {
    Result<std::string> r = grammar::regex_grammar(*regex);
    if (!r.ok()) return ApiError::bad_request(r.error().message(), "regex", "unsupported_value");
    *grammar = std::move(r).value();
    param = "regex";
  }
  if (grammar->empty()) {
    if (gbnf) return ApiError::bad_request("`grammar` is empty", "grammar");
    return std::nullopt;
  }
  Result<grammar::Grammar> parsed = grammar::parse_gbnf(*grammar);
  if (!parsed.ok()) return ApiError::bad_request(parsed.error().message(), param);
  return std::nullopt;
}

}  // namespace keel::server
