// tool_prompt (see tool_prompt.h).
#include "server/tool_prompt.h"

namespace keel::server {
namespace {

using OJson = nlohmann::ordered_json;

// keel's call form for past calls: one object, or an array when there are several.
std::string generic_calls_text(const OJson& tool_calls) {
  OJson calls = OJson::array();
  for (const OJson& c : tool_calls) {
    OJson one;
    one["name"] = c["function"]["name"];
    one["arguments"] = c["function"]["arguments"];
    calls.push_back(std::move(one));
  }
  const OJson& shown = calls.size() == 1 ? calls[0] : calls;
  return shown.dump(-1, ' ', false, OJson::error_handler_t::replace);
}

}  // namespace

std::string generic_tools_text(const ToolRequest& request) {
  std::string text = "You can call these functions:\n";
  for (const ToolDef& t : request.tools) {
    OJson fn;
    fn["name"] = t.name;
    if (!t.description.empty()) fn["description"] = t.description;
    fn["parameters"] = t.parameters;
    text += fn.dump(-1, ' ', false, OJson::error_handler_t::replace) + "\n";
  }
  text +=
      "To call a function, reply with only a JSON object {\"name\": <function name>, "
      "\"arguments\": <arguments object>}";
  if (request.parallel) text += " (or a JSON array of such objects to call several)";
  text += ".";
  return text;
}

ToolPrompt tool_prompt(std::vector<ChatMessage> messages, const ToolRequest& request,
                       const ToolFormat& format) {
  ToolPrompt out;
  if (format.template_renders_tools) {
    if (request.active()) {
      out.tools = OJson::array();
      for (const ToolDef& t : request.tools) out.tools.push_back(t.definition);
    }
    out.messages = std::move(messages);
    return out;
  }
  for (ChatMessage& m : messages) {
    if (m.tool_calls.is_array() && !m.tool_calls.empty()) {
      if (!m.content.empty()) m.content += "\n";
      m.content += generic_calls_text(m.tool_calls);
    }
    m.tool_calls = nullptr;
  }
  if (request.active()) {
    const std::string text = generic_tools_text(request);
    if (!messages.empty() && (messages[0].role == "system" || messages[0].role == "developer")) {
      messages[0].content = text + "\n\n" + messages[0].content;
    } else {
      ChatMessage system;
      system.role = "system";
      system.content = text;
      messages.insert(messages.begin(), std::move(system));
    }
  }
  out.messages = std::move(messages);
  return out;
}

}  // namespace keel::server
