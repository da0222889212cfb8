// ChatMessage and ChatFormatter: how the server turns a chat request's messages into prompt text.
// The formatter is supplied by whoever starts the server — usually template_chat_formatter(), the
// model's chat template (shared by `keel serve`, the fuzz targets and, later, a gateway); the
// server then tokenizes its output with add_special = true and parse_special = true outside its
// plain spans — the bytes that came from the messages, which are tokenized as text, so that a user
// cannot inject special tokens — so a formatter must report those spans (TrackedText) and must
// not render a leading BOS itself when the tokenizer adds one (never a double BOS).
//
// Thread safety: the server calls the formatter concurrently from its io threads (or its
// tokenizer pool); it must be thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/text_span.h"
#include "tokenizer/tokenizer.h"

namespace keel::server {

struct ChatMessage {
  std::string role;          // "system", "developer", "user", "assistant" or "tool"
  std::string content;       // text parts concatenated in order ("" for null content)
  std::string name;          // optional participant name ("" when absent)
  std::string tool_call_id;  // role "tool": the call this message answers ("" when absent)
  // role "assistant": the calls it made, [{"id", "type", "function": {"name", "arguments"}}] with
  // arguments parsed to JSON (tool_request.h); null when none.
  nlohmann::ordered_json tool_calls;
  // role "assistant": its thinking, from `reasoning_content` or `reasoning` (reasoning_split.h);
  // nullopt when absent. Templates read it as `reasoning_content` (Qwen3's does).
  std::optional<std::string> reasoning_content;
};

// Messages → prompt text. add_generation_prompt: end with the assistant turn's opening. tools: the
// template's `tools` variable (OpenAI tool definitions), null for none (tool_prompt.h).
// template_kwargs: the request's chat_template_kwargs (more template variables, e.g.
// {"enable_thinking": false}), an object or null; their text is plain like the messages'.
// Errors (e.g. a template rejecting a role order) are returned to the client as 400.
using ChatFormatter = std::function<Result<tokenizer::TrackedText>(
    std::span<const ChatMessage> messages, bool add_generation_prompt,
    const nlohmann::ordered_json& tools, const nlohmann::ordered_json& template_kwargs)>;

// Messages → prompt text through `tmpl` (a model's tokenizer.chat_template, or ChatML), with the
// tokenizer's BOS and EOS texts as the template's bos_token / eos_token; a BOS the template
// renders is dropped when `tok` adds one itself (tokenizer::prompt_for_tokenizer): never a double
// BOS. A message's name, tool_call_id, tool_calls and reasoning_content reach the template as
// message fields; template_kwargs as template variables (ChatRenderOptions). `tok`
// must outlive the formatter.
[[nodiscard]] ChatFormatter template_chat_formatter(
    std::shared_ptr<const tokenizer::ChatTemplate> tmpl, const tokenizer::Tokenizer* tok);

}  // namespace keel::server
