// GenerationSpec: a validated /v1/chat/completions or /v1/completions request, before
// tokenization. parse_chat_request / parse_completion_request check every field's type and range
// (400 with `param` on failure) and ignore unknown fields, as vLLM does. Decisions:
//   - `stop`: at most ParseLimits::max_stop_strings (OpenAI's 4 by default); empty strings are
//     ignored; each at most max_stop_string_bytes.
//   - chat max tokens: max_completion_tokens, else max_tokens, else unset (= the rest of the
//     context, decided after tokenization); completions: max_tokens, default 16.
//   - completions `logprobs`: 0..20 (vLLM's cap; OpenAI documents 5).
//   - text content parts are joined with "\n" (vLLM); other part types are refused (400).
//   - `stream_options` without `stream: true` is a 400; usage is streamed only when
//     stream_options.include_usage is true.
//   - `cache_id` (keel extension): a context cache id from POST /v1/caches, 1-128 bytes.
//   - `pic_link` (keel extension): "full", "naive", "legolink-K" or "cacheblend-R" for this
//     request's position-independent chunks (chat parts with cache_control
//     position_independent).
//   - `tools`, `tool_choice`, `parallel_tool_calls`: tool_request.h.
//   - `sparse` (keel extension): {"policy": "dense"|"streaming"|"h2o"|"quest"|"raas",
//     "budget": L} — sparse decode for this request; policy required, budget optional (the
//     server's --sparse-budget), an integer in [1, 1048576]; other keys are refused.
//   - `speculative` (keel extension): {"method": "ngram"|"none", "k": 1..16, "ngram_max": 1..16,
//     "ngram_min": 1..ngram_max} — speculative decoding for this request (docs/speculative.md);
//     method required, the rest default to 4, 3 and 1; other keys are refused.
//   - `chat_template_kwargs` (vLLM's and llama-server's name): a JSON object of more chat
//     template variables (e.g. {"enable_thinking": false}); anything else is a 400, and so is a
//     name the server sets itself (messages, tools, add_generation_prompt, ...).
//   - assistant messages may carry `reasoning_content` or `reasoning` (a string or null; the
//     first when both are given), passed to the template as `reasoning_content`.
//   - `early_exit` (keel extension): true | false | {"threshold": number, "layers": [int]} —
//     SpecEE early exit for this request (engine/early_exit_params.h); an object enables it;
//     other keys are refused.
//
// Thread safety: pure functions over their arguments.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/early_exit_params.h"
#include "engine/speculative_params.h"
#include "engine/types.h"
#include "kv/pic.h"
#include "sampling/sampling_params.h"
#include "server/api_error.h"
#include "server/chat_formatter.h"
#include "server/tool_request.h"

namespace keel::server {

enum class ApiKind { kChat, kCompletion };

// One prompt of a completions request: text to tokenize, or token ids given by the client.
struct PromptInput {
  bool is_tokens = false;
  std::string text;             // when !is_tokens
  std::vector<int32_t> tokens;  // when is_tokens (ids already checked against the vocabulary)
};

struct GenerationSpec {
  ApiKind kind = ApiKind::kChat;
  std::string model;                            // as sent; "" when absent
  std::vector<ChatMessage> messages;            // chat only (non-empty)
  bool add_generation_prompt = true;            // chat only (vLLM extension)
  nlohmann::ordered_json chat_template_kwargs;  // chat only: an object, or null when absent
  std::vector<PromptInput> prompts;             // completions only (non-empty)
  int32_t n = 1;                                // choices per prompt
  std::optional<int32_t> max_tokens;            // ≥ 1; chat: unset = rest of the context
  sampling::SamplingParams sampling;  // logprobs = top-N alternatives when logprobs requested
  bool logprobs = false;              // return logprobs (chat `logprobs: true`, completions int)
  int32_t top_logprobs = 0;           // alternatives per position (chat top_logprobs, completions
                                      // `logprobs`)
  std::vector<std::string> stop;      // stop strings (non-empty strings)
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: prepend the prompt text
  std::string cache_salt;
  // OpenAI's `prompt_cache_key` (at most 1024 bytes): accepted and carried; on one process it
  // changes nothing — the prefix cache finds a prompt by its content, and a turn that ended in a
  // tool call keeps its KV whatever its key (docs/agent-kv.md).
  std::string prompt_cache_key;
  // The tenant of the API key (tenants.h; "" = none) and its weight, for the engine's fair
  // admission (engine::GenerationRequest::tenant). Set by the router, never from the body.
  std::string tenant;
  double tenant_weight = 1.0;
  // The agent program the call belongs to (engine::GenerationRequest::program): a Responses
  // chain's first response, or the X-Program-Id header; scoped by the tenant. Set by the router.
  std::string program;
  // vLLM's `priority` (lower first; default 0) and the work's class (the Batch API's lines are
  // batch): the order a JE's admission layer lets held work in (cluster/job/admission.h).
  int32_t priority = 0;
  engine::WorkClass work_class = engine::WorkClass::kInteractive;
  // Structured outputs: the GBNF grammar compiled from response_format json_schema / json_object,
  // `grammar` or `regex` (server/structured_output.h); "" when unconstrained.
  std::string grammar;
  // Tool calling (chat only): tools, tool_choice, parallel_tool_calls. A forced choice's grammar
  // is set into `grammar` by the router, which knows the model's ToolFormat (tool_grammar.h).
  ToolRequest tools;
  std::string cache_id;  // a context cache (POST /v1/caches) to extend; resolved by the router
  std::optional<kv::PicVariant> pic_link;    // `pic_link` (keel extension): how PIC chunks link
  std::optional<std::string> sparse_policy;  // `sparse.policy` (keel extension)
  int32_t sparse_budget = 0;                 // `sparse.budget`; 0 = the server's default
  std::optional<engine::SpeculativeParams> speculative;  // `speculative` (keel extension)
  std::optional<engine::EarlyExitParams> early_exit;     // `early_exit` (keel extension)
  // Completions with cache_id: the cache's tokens, placed before every prompt (whose text is then
  // tokenized without special tokens). Chat caches prepend their messages instead.
  std::vector<int32_t> prefix_tokens;

  [[nodiscard]] size_t num_prompts() const { return kind == ApiKind::kChat ? 1 : prompts.size(); }
};

struct ParseLimits {
  int32_t vocab_size = 0;  // token ids (prompts, logit_bias, stop_token_ids) must be below it
  int32_t max_n = 128;
  int32_t max_choices = 256;  // prompts × n
  int32_t max_stop_strings = 4;
  int32_t max_stop_string_bytes = 1024;
};

ApiResult<GenerationSpec> parse_chat_request(const nlohmann::json& body, const ParseLimits& limits);
ApiResult<GenerationSpec> parse_completion_request(const nlohmann::json& body,
                                                   const ParseLimits& limits);

// Shared with POST /v1/caches: the optional `cache_salt` (1 to 1024 bytes).
std::optional<ApiError> parse_cache_salt(const nlohmann::json& body, std::string* out);
// Shared with /v1/responses: the optional `prompt_cache_key` (a string of at most 1024 bytes).
std::optional<ApiError> parse_prompt_cache_key(const nlohmann::json& body, std::string* out);

// Shared with /tokenize: the optional `chat_template_kwargs` object (null when absent).
std::optional<ApiError> parse_chat_template_kwargs(const nlohmann::json& body,
                                                   nlohmann::ordered_json* out);

// Shared with /tokenize: the `messages` array (param names "messages[i]...").
ApiResult<std::vector<ChatMessage>> parse_messages(const nlohmann::json& messages);
// Shared with /tokenize: the `prompt` union (string, strings, ids, id arrays).
ApiResult<std::vector<PromptInput>> parse_prompt(const nlohmann::json& prompt, int32_t vocab_size);

}  // namespace keel::server
