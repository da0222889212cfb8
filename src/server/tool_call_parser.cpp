// parse_tool_output and scan_call_objects (see tool_call_parser.h).
#include "server/tool_call_parser.h"

#include <algorithm>
#include <optional>

#include <nlohmann/json.hpp>

namespace keel::server {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// {"name": ..., "arguments"|"parameters": ...} → a call, its arguments as `scan` read them;
// nullopt when it is not one. known_only: the name must be one of the request's tools.
std::optional<ToolCall> call_from(const Json& j, const ToolCallScanner& scan,
                                  const ToolRequest& request, bool known_only) {
  if (!j.is_object() || !scan.done()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string()) return std::nullopt;
  if (known_only && request.find(name->get<std::string>()) == nullptr) return std::nullopt;
  ToolCall call;
  call.name = name->get<std::string>();
  call.arguments = scan.arguments();
  if (!Json::parse(call.arguments, nullptr, false).is_object()) return std::nullopt;
  return call;
}

ParsedToolOutput parse_hermes(std::string_view text, const ToolRequest& request) {
  ParsedToolOutput out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t open = text.find(kHermesOpen, pos);
    if (open == std::string_view::npos) break;
    out.content += text.substr(pos, open - pos);
    const size_t body = open + kHermesOpen.size();
    const size_t close = text.find(kHermesClose, body);
    const size_t body_end = close == std::string_view::npos ? text.size() : close;
    const size_t next = close == std::string_view::npos ? text.size() : close + kHermesClose.size();
    const std::string_view body_text = trim(text.substr(body, body_end - body));
    const Json j = Json::parse(body_text, nullptr, false);
    const std::vector<ToolCallScanner> scans = scan_call_objects(body_text);
    std::optional<ToolCall> call;
    if (scans.size() == 1) call = call_from(j, scans[0], request, /*known_only=*/false);
    if (call) {
      out.calls.push_back(std::move(*call));
    } else {
      out.content += text.substr(open, next - open);
    }
    pos = next;
  }
  if (pos < text.size()) out.content += text.substr(pos);
  return out;
}

ParsedToolOutput parse_json_family(ToolFamily family, std::string_view text,
                                   const ToolRequest& request) {
  ParsedToolOutput out;
  std::string_view body = trim(text);
  for (std::string_view marker :
       {std::string_view("<|python_tag|>"), std::string_view("[TOOL_CALLS]")}) {
    if (body.substr(0, marker.size()) == marker) body = trim(body.substr(marker.size()));
  }
  const Json j = Json::parse(body, nullptr, false);
  const std::vector<ToolCallScanner> scans = scan_call_objects(body);
  const bool array_ok = family != ToolFamily::kLlama3;
  if (j.is_object() && scans.size() == 1) {
    if (std::optional<ToolCall> call = call_from(j, scans[0], request, /*known_only=*/true)) {
      out.calls.push_back(std::move(*call));
      return out;
    }
  } else if (j.is_array() && !j.empty() && array_ok && scans.size() == j.size()) {
    for (size_t i = 0; i < j.size(); ++i) {
      std::optional<ToolCall> call = call_from(j[i], scans[i], request, /*known_only=*/true);
      if (!call) {
        out.calls.clear();
        break;
      }
      out.calls.push_back(std::move(*call));
    }
    if (!out.calls.empty()) return out;
  }
  out.content = std::string(text);
  return out;
}

}  // namespace

std::vector<ToolCallScanner> scan_call_objects(std::string_view body) {
  std::vector<ToolCallScanner> out;
  size_t pos = body.find_first_not_of(" \t\r\n");
  if (pos == std::string_view::npos) return out;
  const bool array = body[pos] == '[';
  if (array) ++pos;
  while (pos < body.size()) {
    pos = body.find_first_not_of(" \t\r\n,", pos);
    if (pos == std::string_view::npos || body[pos] != '{') break;
    ToolCallScanner& scan = out.emplace_back();
    pos += scan.push(body.substr(pos));
    if (!scan.done() || !array) break;
  }
  return out;
}

ParsedToolOutput parse_tool_output(ToolFamily family, std::string_view text,
                                   const ToolRequest& request) {
  ParsedToolOutput out = family == ToolFamily::kHermes ? parse_hermes(text, request)
                                                       : parse_json_family(family, text, request);
  if (!out.calls.empty()) {
    if (!request.parallel && out.calls.size() > 1) out.calls.resize(1);
    out.content = std::string(trim(out.content));
  }
  return out;
}

}  // namespace keel::server
