// parse_tool_output and ToolCallStream (see tool_call_parser.h).
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

// {"name": ..., "arguments"|"parameters": ...} → a call; nullopt when it is not one.
// known_only: the name must be one of the request's tools.
std::optional<ToolCall> call_from(const Json& j, const ToolRequest& request, bool known_only) {
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string()) return std::nullopt;
  if (known_only && request.find(name->get<std::string>()) == nullptr) return std::nullopt;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  ToolCall call;
  call.name = name->get<std::string>();
  if (args == j.end() || args->is_null()) {
    call.arguments = "{}";
  } else if (args->is_string()) {
    const Json inner = Json::parse(args->get<std::string>(), nullptr, false);
    if (!inner.is_object()) return std::nullopt;
    call.arguments = inner.dump(-1, ' ', false, Json::error_handler_t::replace);
  } else if (args->is_object()) {
    call.arguments = args->dump(-1, ' ', false, Json::error_handler_t::replace);
  } else {
    return std::nullopt;
  }
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
    const Json j = Json::parse(trim(text.substr(body, body_end - body)), nullptr, false);
    if (std::optional<ToolCall> call = call_from(j, request, /*known_only=*/false)) {
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
  const bool array_ok = family != ToolFamily::kLlama3;
  if (j.is_object()) {
    if (std::optional<ToolCall> call = call_from(j, request, /*known_only=*/true)) {
      out.calls.push_back(std::move(*call));
      return out;
    }
  } else if (j.is_array() && !j.empty() && array_ok) {
    for (const Json& item : j) {
      std::optional<ToolCall> call = call_from(item, request, /*known_only=*/true);
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

std::string ToolCallStream::push(std::string_view text) {
  if (request_->forced() || capturing_) {
    held_ += text;
    return {};
  }
  if (plain_) return std::string(text);
  held_ += text;
  std::string out;
  if (family_ == ToolFamily::kHermes) {
    const size_t open = held_.find(kHermesOpen);
    if (open != std::string::npos) {
      out = held_.substr(0, open);
      held_.erase(0, open);
      capturing_ = true;
      return out;
    }
    // Keep a tail that may be the start of the marker.
    size_t keep = std::min(held_.size(), kHermesOpen.size() - 1);
    while (keep > 0 &&
           kHermesOpen.substr(0, keep) != std::string_view(held_).substr(held_.size() - keep)) {
      --keep;
    }
    out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
  }
  const size_t first = held_.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return {};  // only spaces so far
  if (held_[first] == '{' || held_[first] == '[' || held_[first] == '<') {
    // '<': a textual <|python_tag|> may precede the call.
    capturing_ = true;
    return {};
  }
  plain_ = true;
  out.swap(held_);
  return out;
}

ParsedToolOutput ToolCallStream::finish() {
  ParsedToolOutput out;
  if (!request_->forced() && !capturing_) {
    out.content.swap(held_);
    return out;
  }
  out = parse_tool_output(family_, held_, *request_);
  held_.clear();
  return out;
}

}  // namespace keel::server
