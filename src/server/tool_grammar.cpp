// forced_tool_grammar (see tool_grammar.h).
#include "server/tool_grammar.h"

#include <fmt/format.h>

#include "grammar/json_schema.h"

namespace keel::server {

Result<std::string> forced_tool_grammar(ToolFamily family, const ToolRequest& request) {
  const char* args_key = family == ToolFamily::kLlama3 ? "parameters" : "arguments";
  std::string rules;
  std::string call_alts;
  for (size_t i = 0; i < request.tools.size(); ++i) {
    const ToolDef& t = request.tools[i];
    if (request.choice == ToolChoice::kNamed && t.name != request.forced_name) continue;
    const std::string args_rule = fmt::format("tool{}-args", i);
    KEEL_ASSIGN_OR_RETURN(std::string r, grammar::json_schema_rules(t.parameters, args_rule));
    rules += r;
    const std::string head =
        fmt::format("{{\"name\": {}, \"{}\": ", nlohmann::json(t.name).dump(), args_key);
    call_alts += fmt::format("{}{} {} \"}}\"", call_alts.empty() ? "" : " | ",
                             grammar::gbnf_literal(head), args_rule);
  }
  if (call_alts.empty()) return Status::invalid_argument("no tool to force");
  const bool many = request.parallel && family != ToolFamily::kLlama3;
  std::string root;
  switch (family) {
    case ToolFamily::kGeneric:
      root = many ? "call | \"[\" call (\", \" call)* \"]\"" : "call";
      break;
    case ToolFamily::kHermes:
      rules += "block ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n";
      root = many ? "block (\"\\n\" block)*" : "block";
      break;
    case ToolFamily::kLlama3:
      root = "call";
      break;
    case ToolFamily::kMistral:
      root = many ? "\"[\" call (\", \" call)* \"]\"" : "\"[\" call \"]\"";
      break;
  }
  return fmt::format("root ::= {}\ncall ::= {}\n{}{}", root, call_alts, rules,
                     grammar::json_primitives_gbnf());
}

}  // namespace keel::server
