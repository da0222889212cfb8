// Where and how requests go: the server address parsed from --base-url, the API flavour chosen
// by --endpoint, and the JSON body of one streamed request.
//
// Bodies follow what `vllm bench serve` sends: model, prompt (token-id array or text) or a single
// user message, max_tokens (chat: also max_completion_tokens), temperature, ignore_eos,
// stream: true, stream_options.include_usage: true, plus any --extra-body members (which win).
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "loadgen/workload.h"

namespace keel::loadgen {

// A plain-HTTP server address. https is refused (no TLS in this client).
struct HttpTarget {
  std::string host;       // name or address, without brackets
  std::string port;       // decimal; "80" when the URL has none
  std::string base_path;  // path prefix from the URL without a trailing '/' ("" for none)
};

// Parses "http://host[:port][/prefix]"; names the part at fault on error.
Result<HttpTarget> parse_base_url(std::string_view url);

enum class ApiKind { kCompletions, kChatCompletions };

// kChatCompletions when the endpoint path ends in "chat/completions", else kCompletions.
ApiKind api_kind_for(std::string_view endpoint);

// vLLM's name for the flavour: "openai" (completions) or "openai-chat".
std::string_view backend_name(ApiKind kind);

struct RequestBodyOptions {
  ApiKind api = ApiKind::kCompletions;
  std::string model;         // sent as "model"
  double temperature = 0.0;  // sent as "temperature"
  bool ignore_eos = true;    // sent as "ignore_eos" (a vLLM / llama.cpp extension)
  nlohmann::json extra_body = nlohmann::json::object();  // merged last (overrides)
};

// The JSON request body for one prompt. Token-id prompts on the chat API are an invalid argument.
Result<std::string> build_request_body(const PromptSpec& prompt, const RequestBodyOptions& opts);

}  // namespace keel::loadgen
