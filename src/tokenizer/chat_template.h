// ChatTemplate: turns chat messages into the prompt text a model was trained on, by rendering
// the model's own Jinja2 chat template (GGUF `tokenizer.chat_template`, as published on Hugging
// Face) with keel's Jinja2-subset engine (jinja/template.h), or ChatML when a file has no
// template or one that does not parse. Rendering follows Hugging Face's apply_chat_template:
// variables `messages`, `add_generation_prompt`, `bos_token`, `eos_token`, `tools` and
// `documents` (none unless given), plus any extra context; trim_blocks and lstrip_blocks on.
//
// Untrusted text: render_tracked() reports which bytes of the prompt came from the request (message
// contents and other fields, tools, documents); the server tokenizes those bytes without parsing
// control tokens, so a user cannot write "<|im_start|>system" or "</s>" into the markup.
//
// The "never a double BOS" rule: the server tokenizes the rendered prompt with add_special =
// true and parse_special = true. A BOS the template writes becomes the BOS token (parse_special)
// and the tokenizer adds its own when the vocabulary says so (add_bos()); so when both would
// happen, prompt_for_tokenizer() drops the leading BOS text and the tokenizer puts it back.
// The result holds exactly one BOS when either side wants one, and none otherwise.
//
// Thread safety: a ChatTemplate is immutable; render() may run concurrently from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "gguf/reader.h"
#include "jinja/template.h"
#include "tokenizer/tokenizer.h"

namespace keel::tokenizer {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", "tool", ...
  std::string content;  // the text (the server joins array-of-parts content before this)
  // More fields of the message as templates read them (tool_calls, tool_call_id, name,
  // reasoning_content, ...): an object, or null for none. A "content" key here replaces
  // `content` (e.g. null for an assistant turn that only calls tools); "role" is ignored.
  nlohmann::ordered_json extra;
};

struct ChatRenderOptions {
  bool add_generation_prompt = true;  // end with the header of an assistant turn
  std::string bos_token;              // text of the BOS token ("" when the vocab has none)
  std::string eos_token;              // text of the EOS token
  nlohmann::ordered_json tools;       // list of tool schemas; null: `tools` is none
  nlohmann::ordered_json documents;   // list of documents (RAG templates); null: none
  // More template variables, e.g. {"enable_thinking": false}; must be an object or null.
  nlohmann::ordered_json extra_context;
  // A request's chat_template_kwargs: more variables, from the client, so their text is plain
  // (never special tokens); an object or null. A name the render sets itself (messages, tools,
  // documents, add_generation_prompt, bos_token, eos_token) is refused (is_reserved_variable).
  nlohmann::ordered_json template_kwargs;
  // Clock behind strftime_now() (formatted in UTC); null: the system clock.
  std::function<std::chrono::system_clock::time_point()> now;
  jinja::RenderLimits limits;
};

class ChatTemplate {
 public:
  // Errors: InvalidArgument "chat template: line L, column C: ..." for syntax errors.
  static Result<ChatTemplate> parse(std::string_view source);
  // ChatML ("<|im_start|>role\ncontent<|im_end|>\n" per message): the fallback.
  static ChatTemplate chatml();
  // The classic Llama 2 chat format: "<s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST]
  // {assistant} </s><s>[INST] ...", roles alternating user/assistant after an optional system.
  static ChatTemplate llama2();
  // A template keel ships (builtin_chat_templates.h); nullopt for an unknown name.
  static std::optional<ChatTemplate> builtin(std::string_view name);
  // tokenizer.chat_template when present and parseable; else ChatML, with a logged warning
  // naming the file and the reason.
  static ChatTemplate from_gguf(const gguf::GgufFile& file);

  // Errors: InvalidArgument "chat template: ..." when the template rejects the conversation
  // (raise_exception: "raised by template: <message>") or fails at run time (with line and
  // column); ResourceExhausted when a render limit is hit.
  [[nodiscard]] Result<std::string> render(std::span<const ChatMessage> messages,
                                           bool add_generation_prompt, const std::string& bos_token,
                                           const std::string& eos_token) const;
  [[nodiscard]] Result<std::string> render(std::span<const ChatMessage> messages,
                                           const ChatRenderOptions& options) const;
  // The rendered prompt with its plain spans: the bytes of message fields (content, name,
  // tool_call_id, ... — all but the role), tools and documents, i.e. what the request wrote.
  // Tokenize it with Tokenizer::encode(const TrackedText&, ...) so that only the template's
  // own markup yields special tokens.
  [[nodiscard]] Result<TrackedText> render_tracked(std::span<const ChatMessage> messages,
                                                   const ChatRenderOptions& options) const;

  [[nodiscard]] const std::string& source() const { return source_; }
  // True when from_gguf() fell back to ChatML.
  [[nodiscard]] bool is_fallback() const { return fallback_; }

 private:
  ChatTemplate(std::string source, jinja::Template tmpl)
      : source_(std::move(source)), tmpl_(std::move(tmpl)) {}

  std::string source_;
  jinja::Template tmpl_;
  bool fallback_ = false;
};

// True for the variables every render sets itself (see ChatRenderOptions::template_kwargs).
bool is_reserved_variable(std::string_view name);

// bos_token / eos_token texts of a vocabulary for ChatRenderOptions ("" when it has none).
std::string bos_text(const Tokenizer& tokenizer);
std::string eos_text(const Tokenizer& tokenizer);

// True when `prompt` starts with the text of the tokenizer's BOS token.
bool rendered_starts_with_bos(std::string_view prompt, const Tokenizer& tokenizer);

// The text to pass to tokenizer.encode(text, /*add_special=*/true, /*parse_special=*/true): the
// prompt without its leading BOS text when the tokenizer adds BOS itself (see the file comment),
// else the prompt unchanged. The view points into `prompt`.
std::string_view prompt_for_tokenizer(std::string_view prompt, const Tokenizer& tokenizer);
// The same for a tracked prompt (spans shifted); a leading BOS text inside a plain span is the
// user's and stays.
TrackedText prompt_for_tokenizer(TrackedText prompt, const Tokenizer& tokenizer);

}  // namespace keel::tokenizer
