// JSON bodies and SSE events of /v1/chat/completions and /v1/completions, shaped as OpenAI's
// (ids chatcmpl-…/cmpl-…, object, created, model, choices, usage) with vLLM's additions
// (choices[].stop_reason, usage.prompt_tokens_details.cached_tokens). SSE events are framed
// "data: <compact JSON>\n\n" (LF only); the stream ends with "data: [DONE]\n\n".
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/choice_output.h"
#include "server/generation_request.h"
#include "server/tool_call_parser.h"

namespace keel::server {

struct ResponseMeta {
  ApiKind kind = ApiKind::kChat;
  std::string id;       // "chatcmpl-…" or "cmpl-…"
  int64_t created = 0;  // Unix seconds
  std::string model;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  [[nodiscard]] nlohmann::json to_json() const;
};

// A finished choice of a non-streamed response.
struct FinishedChoice {
  int32_t index = 0;
  std::string text;           // echoed prompt (completions) + generated text
  std::string finish_reason;  // "stop", "length" or "tool_calls"
  std::optional<std::string> stop_reason;
  bool content_null = false;  // chat: "content": null (a message with only tool calls)
  nlohmann::json tool_calls;  // chat: message.tool_calls (tool_calls_json), null when none
  // chat: the thinking (reasoning_split.h), as message.reasoning_content and message.reasoning;
  // nullopt: neither key.
  std::optional<std::string> reasoning;
  bool has_logprobs = false;
  std::span<const LogprobEntry> logprobs;
};

// The non-streamed body.
std::string completion_body(const ResponseMeta& meta, std::span<const FinishedChoice> choices,
                            const Usage& usage);

// One streamed choice update.
struct ChunkChoice {
  int32_t index = 0;
  bool role = false;                // chat: delta carries role "assistant"
  std::optional<std::string> text;  // delta content / text (nullopt: none)
  // chat: thinking text, as delta.reasoning_content and delta.reasoning (nullopt: none)
  std::optional<std::string> reasoning;
  nlohmann::json tool_calls;  // chat: delta.tool_calls (tool_call_*_delta), null when none
  std::optional<std::string> finish_reason;
  std::optional<std::string> stop_reason;
  bool has_logprobs = false;  // logprobs requested (else "logprobs": null)
  std::span<const LogprobEntry> logprobs;
};

// "data: {chunk}\n\n" for one choice update. include_usage: add "usage": null.
std::string chunk_event(const ResponseMeta& meta, const ChunkChoice& choice, bool include_usage);
// "data: {chunk with choices [] and usage}\n\n".
std::string usage_event(const ResponseMeta& meta, const Usage& usage);
// "data: {"error": {...}}\n\n".
std::string error_event(const ApiError& error);
inline constexpr std::string_view kDoneEvent = "data: [DONE]\n\n";

// Tool calls as OpenAI writes them: a message's [{"id", "type": "function", "function": {"name",
// "arguments"}}]; in a stream, a call's first delta [{"index", "id", "type", "function": {"name",
// "arguments": ""}}], then argument fragments [{"index", "function": {"arguments"}}].
nlohmann::json tool_calls_json(std::span<const ToolCall> calls);
nlohmann::json tool_call_start_delta(size_t index, const ToolCall& call);
nlohmann::json tool_call_arguments_delta(size_t index, std::string_view fragment);

// Logprob JSON in each endpoint's format (exposed for tests).
nlohmann::json chat_logprobs_json(std::span<const LogprobEntry> entries);
nlohmann::json completion_logprobs_json(std::span<const LogprobEntry> entries);

// Compact JSON text; invalid UTF-8 is replaced, never thrown on.
std::string dump_json(const nlohmann::json& j);

}  // namespace keel::server
