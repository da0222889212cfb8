// Base-URL parsing and request bodies; nlohmann exceptions are caught here.
#include "loadgen/endpoint.h"

#include <charconv>

namespace keel::loadgen {

Result<HttpTarget> parse_base_url(std::string_view url) {
  constexpr std::string_view kHttp = "http://";
  if (url.starts_with("https://")) {
    return Status::unsupported("base-url '" + std::string(url) +
                               "': https is not supported (plain http only)");
  }
  if (!url.starts_with(kHttp)) {
    return Status::invalid_argument("base-url '" + std::string(url) + "' must start with http://");
  }
  std::string_view rest = url.substr(kHttp.size());
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  HttpTarget t;
  if (slash != std::string_view::npos) {
    t.base_path = std::string(rest.substr(slash));
    while (!t.base_path.empty() && t.base_path.back() == '/') t.base_path.pop_back();
  }
  std::string_view port;
  if (authority.starts_with('[')) {  // [v6 address]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return Status::invalid_argument("base-url '" + std::string(url) + "': unclosed '['");
    }
    t.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return Status::invalid_argument("base-url '" + std::string(url) + "': junk after ']'");
      }
      port = after.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    t.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (t.host.empty()) {
    return Status::invalid_argument("base-url '" + std::string(url) + "' has no host");
  }
  t.port = port.empty() ? "80" : std::string(port);
  int port_num = 0;
  auto [end, ec] = std::from_chars(t.port.data(), t.port.data() + t.port.size(), port_num);
  if (ec != std::errc() || end != t.port.data() + t.port.size() || port_num < 1 ||
      port_num > 65535) {
    return Status::invalid_argument("base-url '" + std::string(url) + "': bad port '" + t.port +
                                    "'");
  }
  return t;
}

ApiKind api_kind_for(std::string_view endpoint) {
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.remove_suffix(1);
  return endpoint.ends_with("chat/completions") ? ApiKind::kChatCompletions : ApiKind::kCompletions;
}

std::string_view backend_name(ApiKind kind) {
  switch (kind) {
    case ApiKind::kCompletions:
      return "openai";
    case ApiKind::kChatCompletions:
      return "openai-chat";
  }
  return "?";
}

Result<std::string> build_request_body(const PromptSpec& prompt, const RequestBodyOptions& opts) {
  using nlohmann::json;
  const bool chat = opts.api == ApiKind::kChatCompletions;
  if (chat && prompt.text.empty() && !prompt.token_ids.empty()) {
    return Status::invalid_argument(
        "token-id prompts cannot be sent to a chat endpoint; use --prompt-format text");
  }
  try {
    json body = json::object();
    body["model"] = opts.model;
    if (!prompt.documents.empty()) {
      if (!chat) {
        return Status::invalid_argument(
            "the rag workload needs a chat endpoint "
            "(--endpoint /v1/chat/completions)");
      }
      json parts = json::array();
      for (const std::string& d : prompt.documents) {
        parts.push_back(
            {{"type", "text"}, {"text", d}, {"cache_control", {{"type", "position_independent"}}}});
      }
      body["messages"] = json::array({{{"role", "system"}, {"content", std::move(parts)}},
                                      {{"role", "user"}, {"content", prompt.text}}});
      body["max_completion_tokens"] = prompt.output_len;
    } else if (chat) {
      body["messages"] = json::array({{{"role", "user"}, {"content", prompt.text}}});
      body["max_completion_tokens"] = prompt.output_len;
    } else if (!prompt.token_ids.empty()) {
      body["prompt"] = prompt.token_ids;
    } else {
      body["prompt"] = prompt.text;
    }
    body["max_tokens"] = prompt.output_len;
    body["temperature"] = opts.temperature;
    if (opts.ignore_eos) body["ignore_eos"] = true;
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    if (opts.extra_body.is_object()) {
      for (const auto& [key, value] : opts.extra_body.items()) body[key] = value;
    }
    return body.dump();
  } catch (const json::exception& e) {
    return Status::invalid_argument(std::string("cannot encode the request body: ") + e.what());
  }
}

}  // namespace keel::loadgen
