// parse_tool_request / parse_message_tool_calls (see tool_request.h).
#include "server/tool_request.h"

#include <fmt/format.h>

#include <set>

#include "grammar/json_schema.h"

namespace keel::server {
namespace {

constexpr size_t kMaxTools = 128;
constexpr size_t kMaxNameBytes = 64;

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

MaybeError parse_parameters(const Json& fn, const std::string& where, ToolDef* tool) {
  const std::string param = where + ".parameters";
  const Json* params = field(fn, "parameters");
  if (params == nullptr) {
    tool->parameters = nlohmann::ordered_json{{"type", "object"}};
    return std::nullopt;
  }
  if (!params->is_object()) return type_error(param, "a JSON Schema object", *params);
  if (const Json* type = field(*params, "type"); type != nullptr && *type != "object") {
    return ApiError::bad_request(
        fmt::format("`{}.type` must be \"object\": arguments are a JSON object", param),
        param + ".type");
  }
  tool->parameters = *params;
  if (!params->contains("type")) tool->parameters["type"] = "object";
  Result<std::string> rules = grammar::json_schema_rules(tool->parameters, "check");
  if (!rules.ok())
    return ApiError::bad_request(rules.error().message(), param, "unsupported_value");
  return std::nullopt;
}

MaybeError parse_tool(const Json& t, size_t i, ToolDef* tool) {
  const std::string where = fmt::format("tools[{}]", i);
  if (!t.is_object()) return type_error(where, "an object", t);
  const Json* type = field(t, "type");
  if (type == nullptr || *type != "function") {
    return ApiError::bad_request(fmt::format("`{}.type` must be \"function\"", where),
                                 where + ".type");
  }
  const Json* fn = field(t, "function");
  if (fn == nullptr || !fn->is_object()) {
    return ApiError::bad_request(fmt::format("`{}.function` must be an object", where),
                                 where + ".function");
  }
  const std::string fwhere = where + ".function";
  const Json* name = field(*fn, "name");
  if (name == nullptr || !name->is_string() || !valid_name(name->get<std::string>())) {
    return ApiError::bad_request(
        fmt::format("`{}.name` must be 1 to 64 letters, digits, underscores or dashes", fwhere),
        fwhere + ".name");
  }
  tool->name = name->get<std::string>();
  std::optional<std::string> description;
  KEEL_API_TRY(read_string(*fn, "description", &description));
  if (description) tool->description = std::move(*description);
  bool strict = false;
  KEEL_API_TRY(read_bool(*fn, "strict", &strict));
  KEEL_API_TRY(parse_parameters(*fn, fwhere, tool));
  tool->definition = t;
  return std::nullopt;
}

MaybeError parse_tools(const Json& body, ToolRequest* out) {
  const Json* tools = field(body, "tools");
  if (tools == nullptr) return std::nullopt;
  if (!tools->is_array()) return type_error("tools", "an array of tools", *tools);
  if (tools->size() > kMaxTools) {
    return ApiError::bad_request(
        fmt::format("`tools` may hold at most {} functions, got {}", kMaxTools, tools->size()),
        "tools");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < tools->size(); ++i) {
    ToolDef tool;
    KEEL_API_TRY(parse_tool((*tools)[i], i, &tool));
    if (!names.insert(tool.name).second) {
      return ApiError::bad_request(
          fmt::format("function name \"{}\" appears more than once in `tools`", tool.name),
          fmt::format("tools[{}].function.name", i));
    }
    out->tools.push_back(std::move(tool));
  }
  return std::nullopt;
}

MaybeError parse_choice(const Json& body, ToolRequest* out) {
  out->choice = out->tools.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  const Json* choice = field(body, "tool_choice");
  if (choice == nullptr) return std::nullopt;
  if (choice->is_string()) {
    const std::string s = choice->get<std::string>();
    if (s == "none") {
      out->choice = ToolChoice::kNone;
    } else if (s == "auto") {
      // "auto" without tools is "none" (nothing to call).
    } else if (s == "required") {
      out->choice = ToolChoice::kRequired;
    } else {
      return ApiError::bad_request(
          "`tool_choice` must be \"none\", \"auto\", \"required\" or "
          "{\"type\": \"function\", \"function\": {\"name\": ...}}",
          "tool_choice", "unsupported_value");
    }
  } else if (choice->is_object()) {
    const Json* type = field(*choice, "type");
    const Json* fn = field(*choice, "function");
    const Json* name = fn != nullptr && fn->is_object() ? field(*fn, "name") : nullptr;
    if (type == nullptr || *type != "function" || name == nullptr || !name->is_string()) {
      return ApiError::bad_request(
          "`tool_choice` as an object must be {\"type\": \"function\", \"function\": {\"name\": "
          "...}}",
          "tool_choice");
    }
    out->choice = ToolChoice::kNamed;
    out->forced_name = name->get<std::string>();
    if (out->find(out->forced_name) == nullptr) {
      return ApiError::bad_request(
          fmt::format("`tool_choice` names function \"{}\", which is not in `tools`",
                      out->forced_name.substr(0, 64)),
          "tool_choice");
    }
  } else {
    return type_error("tool_choice", "a string or an object", *choice);
  }
  if (out->forced() && out->tools.empty()) {
    return ApiError::bad_request("`tool_choice` \"required\" needs `tools`", "tool_choice");
  }
  return std::nullopt;
}

ApiResult<nlohmann::ordered_json> parse_one_call(const Json& call, const std::string& where) {
  if (!call.is_object()) return type_error(where, "an object", call);
  const Json* type = field(call, "type");
  if (type != nullptr && *type != "function") {
    return ApiError::bad_request(fmt::format("`{}.type` must be \"function\"", where),
                                 where + ".type");
  }
  std::optional<std::string> id;
  KEEL_API_TRY(read_string(call, "id", &id));
  const Json* fn = field(call, "function");
  if (fn == nullptr || !fn->is_object()) {
    return ApiError::bad_request(fmt::format("`{}.function` must be an object", where),
                                 where + ".function");
  }
  const Json* name = field(*fn, "name");
  if (name == nullptr || !name->is_string()) {
    return ApiError::bad_request(fmt::format("`{}.function.name` must be a string", where),
                                 where + ".function.name");
  }
  const Json* args = field(*fn, "arguments");
  if (args != nullptr && !args->is_string()) {
    return type_error(where + ".function.arguments", "a string of JSON", *args);
  }
  nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
  if (args != nullptr) {
    arguments = nlohmann::ordered_json::parse(args->get<std::string>(), nullptr, false);
    if (arguments.is_discarded()) arguments = args->get<std::string>();
  }
  nlohmann::ordered_json out;
  out["id"] = id.value_or("");
  out["type"] = "function";
  out["function"] = {{"name", name->get<std::string>()}, {"arguments", std::move(arguments)}};
  return out;
}

}  // namespace

const ToolDef* ToolRequest::find(std::string_view name) const {
  for (const ToolDef& t : tools) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

MaybeError parse_tool_request(const Json& body, ToolRequest* out) {
  *out = ToolRequest();
  KEEL_API_TRY(parse_tools(body, out));
  KEEL_API_TRY(parse_choice(body, out));
  return read_bool(body, "parallel_tool_calls", &out->parallel);
}

ApiResult<nlohmann::ordered_json> parse_message_tool_calls(const Json& msg,
                                                           const std::string& where) {
  const Json* calls = field(msg, "tool_calls");
  if (calls == nullptr) return nlohmann::ordered_json();
  const std::string param = where + ".tool_calls";
  if (!calls->is_array()) return type_error(param, "an array", *calls);
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < calls->size(); ++i) {
    ApiResult<nlohmann::ordered_json> c =
        parse_one_call((*calls)[i], fmt::format("{}[{}]", param, i));
    if (!c.ok()) return c.error();
    out.push_back(std::move(c.value()));
  }
  return out;
}

}  // namespace keel::server
