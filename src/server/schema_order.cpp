// apply_schema_order (schema_order.h): re-reads the schemas from the body text in order.
#include "server/schema_order.h"

#include "grammar/json_schema.h"

namespace keel::server {
namespace {

using OJson = nlohmann::ordered_json;

bool has_json_schema(const nlohmann::json& body) {
  const auto rf = body.find("response_format");
  return rf != body.end() && rf->is_object() && rf->contains("type") &&
         (*rf)["type"] == "json_schema";
}

}  // namespace

MaybeError apply_schema_order(const nlohmann::json& body, const BodyText& text,
                              GenerationSpec* spec) {
  const bool schema = has_json_schema(body);
  if (!schema && spec->tools.tools.empty()) return std::nullopt;
  OJson sent;
  try {
    sent = OJson::parse(text.json);
  } catch (const OJson::exception&) {
    return std::nullopt;  // unreachable: the same text parsed as nlohmann::json
  }
  const OJson& b = text.body_key.empty() ? sent : sent[std::string(text.body_key)];
  if (schema) {
    const OJson& s = b["response_format"]["json_schema"]["schema"];
    Result<std::string> gbnf = grammar::json_schema_to_gbnf(s);
    if (!gbnf.ok()) {
      return ApiError::bad_request(gbnf.error().message(), "response_format.json_schema.schema",
                                   "unsupported_value");
    }
    spec->grammar = std::move(gbnf).value();
  }
  for (size_t i = 0; i < spec->tools.tools.size(); ++i) {
    ToolDef& t = spec->tools.tools[i];
    const OJson& def = b["tools"][i];
    t.definition = def;
    const OJson& fn = def["function"];
    if (fn.contains("parameters")) {
      t.parameters = fn["parameters"];
      if (!t.parameters.contains("type")) t.parameters["type"] = "object";
    }
  }
  return std::nullopt;
}

}  // namespace keel::server
