// forced_tool_grammar (see tool_grammar.h).
#include "server/tool_grammar.h"

#include <fmt/format.h>

#include "core/check.h"
#include "grammar/json_schema.h"

namespace keel::server {

namespace {

// `call ::= ...` (one alternative per tool `request` may call) and the arguments' rules.
Result<std::string> call_rules(ToolFamily family, const ToolRequest& request) {
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
  if (call_alts.empty()) return Status::invalid_argument("no tool to call");
  return fmt::format("call ::= {}\n{}", call_alts, rules);
}

// The calls in the family's syntax: `block` for Hermes, the rule body for the JSON families.
std::string calls_body(ToolFamily family, bool parallel) {
  const bool many = parallel && family != ToolFamily::kLlama3;
  switch (family) {
    case ToolFamily::kGeneric:
      return many ? "call | \"[\" call (\", \" call)* \"]\"" : "call";
    case ToolFamily::kHermes:
      return many ? "block (\"\\n\" block)*" : "block";
    case ToolFamily::kLlama3:
      return "call";
    case ToolFamily::kMistral:
      return many ? "\"[\" call (\", \" call)* \"]\"" : "\"[\" call \"]\"";
  }
  return "call";
}

constexpr std::string_view kHermesBlock = "block ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n";

std::string class_char(char c) { return fmt::format("\\x{:02X}", static_cast<uint8_t>(c)); }

}  // namespace

std::string text_without_rules(std::string_view marker, const std::string& name) {
  // KMP: state k = the longest prefix of `marker` that ends the text so far (k < |marker|).
  std::string chars;
  for (char c : marker) {
    if (chars.find(c) == std::string::npos) chars += c;
  }
  auto next_state = [&](size_t k, char c) {
    std::string seen = std::string(marker.substr(0, k)) + c;
    for (size_t len = std::min(seen.size(), marker.size()); len > 0; --len) {
      if (seen.compare(seen.size() - len, len, marker.substr(0, len)) == 0) return len;
    }
    return size_t{0};
  };
  std::string other = "[^";
  for (char c : chars) other += class_char(c);
  other += "]";
  std::string rules;
  for (size_t k = 0; k < marker.size(); ++k) {
    std::string alts = other + " " + name + "-0";
    for (char c : chars) {
      const size_t next = next_state(k, c);
      if (next == marker.size()) continue;  // would complete the marker
      alts += fmt::format(" | \"{}\" {}-{}", class_char(c), name, next);
    }
    rules += fmt::format("{}-{} ::= ({})?\n", name, k, alts);
  }
  return rules;
}

std::string with_reasoning_prefix(std::string_view tool_grammar, bool in_reasoning) {
  constexpr std::string_view kRoot = "root ::= ";
  KEEL_CHECK(tool_grammar.starts_with(kRoot));
  const size_t eol = tool_grammar.find('\n');
  KEEL_CHECK(eol != std::string_view::npos);
  const std::string_view body = tool_grammar.substr(kRoot.size(), eol - kRoot.size());
  std::string out = fmt::format("root ::= {} ({})\n", in_reasoning ? "think" : "think?", body);
  out += tool_grammar.substr(eol + 1);
  if (!out.ends_with('\n')) out += '\n';
  out += fmt::format("think ::= {}reasoning-0 \"</think>\" [ \\t\\r\\n]*\n",
                     in_reasoning ? "" : "\"<think>\" ");
  out += text_without_rules("</think>", "reasoning");
  return out;
}

Result<std::string> forced_tool_grammar(ToolFamily family, const ToolRequest& request) {
  KEEL_ASSIGN_OR_RETURN(std::string calls, call_rules(family, request));
  if (family == ToolFamily::kHermes) calls += kHermesBlock;
  return fmt::format("root ::= {}\n{}{}", calls_body(family, request.parallel), calls,
                     grammar::json_primitives_gbnf());
}

Result<std::string> auto_tool_grammar(ToolFamily family, const ToolRequest& request) {
  KEEL_ASSIGN_OR_RETURN(std::string calls, call_rules(family, request));
  std::string root;
  if (family == ToolFamily::kHermes) {
    calls += kHermesBlock;
    calls += text_without_rules("<tool_call>", "text");
    root = request.parallel ? "text-0 (block text-0)*" : "text-0 (block text-0)?";
  } else {
    // Free text may not open with `{` or `[`: such an output is a call.
    calls += "calls ::= " + calls_body(family, request.parallel) + "\n";
    calls += "free ::= [ \\t\\r\\n]* ([^ \\t\\r\\n{\\[] .*)?\n";
    root = "calls | free";
  }
  return fmt::format("root ::= {}\n{}{}", root, calls, grammar::json_primitives_gbnf());
}

}  // namespace keel::server
