// ChatMessage and ChatFormatter: how the server turns a chat request's messages into prompt text.
// The formatter (the model's chat template) is supplied by whoever starts the server; the server
// then tokenizes its output with add_special = true and parse_special = true outside its plain
// spans — the bytes that came from the messages, which are tokenized as text, so that a user
// cannot inject special tokens — so a formatter must report those spans (TrackedText) and must
// not render a leading BOS itself when the tokenizer adds one (never a double BOS).
//
// Thread safety: the server calls the formatter concurrently from its io threads (or its
// tokenizer pool); it must be thread-safe.
#pragma once

#include <functional>
#include <span>
#include <string>

#include "core/result.h"
#include "tokenizer/text_span.h"

namespace keel::server {

struct ChatMessage {
  std::string role;          // "system", "developer", "user", "assistant" or "tool"
  std::string content;       // text parts concatenated in order ("" for null content)
  std::string name;          // optional participant name ("" when absent)
  std::string tool_call_id;  // role "tool": the call this message answers ("" when absent)
};

// Messages → prompt text. add_generation_prompt: end with the assistant turn's opening.
// Errors (e.g. a template rejecting a role order) are returned to the client as 400.
using ChatFormatter = std::function<Result<tokenizer::TrackedText>(
    std::span<const ChatMessage> messages, bool add_generation_prompt)>;

}  // namespace keel::server
