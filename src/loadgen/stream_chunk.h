// One streamed OpenAI payload (the data of one SSE event) reduced to what the benchmark needs:
// is it a content chunk (non-empty `choices`), the terminator `[DONE]`, an error object, and does
// it carry `usage`. Works for `text_completion` chunks (choices[0].text) and
// `chat.completion.chunk` (choices[0].delta.content / reasoning_content / reasoning).
//
// Thread safety: pure function.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace keel::loadgen {

enum class ChunkKind {
  kContent,    // `choices` is a non-empty array (its text may be empty, e.g. the role chunk)
  kNoChoices,  // a JSON object without choices (usage-only chunk, or something ignorable)
  kDone,       // the `[DONE]` terminator
  kError,      // an object with an `error` member: the server failed mid-stream
};

struct StreamChunk {
  ChunkKind kind = ChunkKind::kNoChoices;
  std::string text;                          // kContent: text of choices[0] ("" if none)
  std::optional<int64_t> completion_tokens;  // usage.completion_tokens when usage is present
  std::optional<int64_t> prompt_tokens;      // usage.prompt_tokens when usage is present
  std::string error_message;                 // kError: error.message (or the raw error value)
};

// Parses one SSE data payload. A payload that is neither `[DONE]` nor a JSON object is an error
// (corrupt) whose message quotes the start of the payload.
Result<StreamChunk> parse_stream_chunk(std::string_view data);

// Best-effort one-line message from an HTTP error body: error.message, a string `error`, a
// `message`/`detail` member, or the body itself, cut to max_len bytes.
std::string error_message_from_body(std::string_view body, size_t max_len = 300);

}  // namespace keel::loadgen
