// Prompt preparation for a generation request, off the engine thread: chat messages go through
// the ChatFormatter and are tokenized (add_special, parse_special — but the message contents, the
// formatter's plain spans, as text, never as special tokens; with position-independent parts,
// piece by piece — pic_segments.h); completion prompts (raw text: special tokens parsed, as
// llama-server and vLLM do) are
// tokenized the same way or taken as given ids (after spec.prefix_tokens, a context cache's,
// when set: the text is then tokenized without special tokens). Then each prompt's token budget is
// fixed: explicit max_tokens must fit (prompt + max_tokens ≤ max_model_len, else 400
// context_length_exceeded with OpenAI's wording); chat without a limit gets the rest of the
// context. A text whose byte length alone proves it too long is refused before it is tokenized
// (refuse_if_provably_long), so an 8 MB prompt costs no tokenization.
//
// Thread safety: reentrant (the Tokenizer and the ChatFormatter are thread-safe).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/generation_request.h"
#include "server/reasoning_split.h"
#include "server/server_context.h"

namespace keel::server {

struct PreparedPrompt {
  std::vector<int32_t> tokens;              // non-empty
  std::string text;                         // the prompt as text (for echo)
  int32_t max_tokens = 0;                   // ≥ 1
  std::vector<kv::PicChunk> pic_chunks;     // position-independent spans of `tokens` (chat)
  ThinkTail think_tail = ThinkTail::kNone;  // chat: how the generation prompt left <think>
};

struct PreparedPrompts {  // default-constructible (crosses a co_spawn)
  std::vector<PreparedPrompt> prompts;
  std::optional<ApiError> error;
};

PreparedPrompts prepare_prompts(const ServerContext& ctx, const GenerationSpec& spec);

// The messages as the template should see them under ctx.config.pic_mode: marks stripped
// ("off"), kept ("marked"), or added to every message before the last user message ("auto").
std::vector<ChatMessage> pic_marked_messages(const ServerContext& ctx,
                                             const std::vector<ChatMessage>& messages);

// The messages as a template sees them when no tools are offered (/tokenize, context caches):
// past tool calls kept for a tool-aware template, written into the content otherwise
// (tool_prompt.h).
std::vector<ChatMessage> plain_tool_messages(const ServerContext& ctx,
                                             std::vector<ChatMessage> messages);

// Before tokenizing: the 400 context_length_exceeded when `text` needs, judged from its byte
// length alone (Tokenizer::min_tokens), so many tokens that they and `more_tokens` (the
// completion, a cache prefix) cannot fit the context; nullopt when it may fit.
std::optional<ApiError> refuse_if_provably_long(const ServerContext& ctx, ApiKind kind,
                                                std::string_view text, int64_t more_tokens);

// The 400 for a prompt that does not fit (exposed for tests). max_tokens nullopt: the chat
// default (rest of the context) had no room at all.
ApiError context_length_error(ApiKind kind, int64_t max_model_len, int64_t prompt_tokens,
                              std::optional<int64_t> max_tokens);

}  // namespace keel::server
