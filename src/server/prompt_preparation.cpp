// prepare_prompts (see prompt_preparation.h).
#include "server/prompt_preparation.h"

#include <fmt/format.h>

#include "server/pic_segments.h"
#include "server/tool_prompt.h"

namespace keel::server {

ApiError context_length_error(ApiKind kind, int64_t max_model_len, int64_t prompt_tokens,
                              std::optional<int64_t> max_tokens) {
  const char* what = kind == ApiKind::kChat ? "messages" : "prompt";
  std::string message;
  if (max_tokens) {
    message = fmt::format(
        "This model's maximum context length is {} tokens. However, you requested {} tokens ({} "
        "in the {}, {} in the completion). Please reduce the length of the {} or completion.",
        max_model_len, prompt_tokens + *max_tokens, prompt_tokens, what, *max_tokens, what);
  } else {
    message = fmt::format(
        "This model's maximum context length is {} tokens. However, your {} resulted in {} tokens, "
        "which leaves no room for the completion. Please reduce the length of the {}.",
        max_model_len, what, prompt_tokens, what);
  }
  return ApiError::bad_request(std::move(message), what, "context_length_exceeded");
}

std::vector<ChatMessage> pic_marked_messages(const ServerContext& ctx,
                                             const std::vector<ChatMessage>& messages) {
  std::vector<ChatMessage> out = messages;
  if (ctx.config.pic_mode == "off") {
    for (ChatMessage& m : out) m.content = strip_pic_marks(m.content);
  } else if (ctx.config.pic_mode == "auto") {
    size_t last_user = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i].role == "user") last_user = i;
    }
    for (size_t i = 0; i < last_user; ++i) {
      if (!has_pic_marks(out[i].content) && !out[i].content.empty()) {
        out[i].content = mark_pic(out[i].content);
      }
    }
  }
  return out;
}

std::optional<ApiError> refuse_if_provably_long(const ServerContext& ctx, ApiKind kind,
                                                std::string_view text, int64_t more_tokens) {
  const int64_t max_len = ctx.deps.engine->max_model_len();
  if (max_len <= 0) return std::nullopt;  // not known yet (the model is loading)
  const auto at_least = static_cast<int64_t>(ctx.deps.tokenizer->min_tokens(text));
  if (at_least + more_tokens <= max_len) return std::nullopt;
  const char* what = kind == ApiKind::kChat ? "messages" : "prompt";
  return ApiError::bad_request(
      fmt::format("This model's maximum context length is {} tokens. However, your {} is {} bytes "
                  "long, which is at least {} tokens. Please reduce the length of the {}.",
                  max_len, what, text.size(), at_least, what),
      what, "context_length_exceeded");
}

std::vector<ChatMessage> plain_tool_messages(const ServerContext& ctx,
                                             std::vector<ChatMessage> messages) {
  return tool_prompt(std::move(messages), ToolRequest(), ctx.deps.tool_format).messages;
}

PreparedPrompts prepare_prompts(const ServerContext& ctx, const GenerationSpec& spec) {
  PreparedPrompts out;
  const tokenizer::Tokenizer& tok = *ctx.deps.tokenizer;
  if (spec.kind == ApiKind::kChat) {
    ToolPrompt tp = tool_prompt(spec.messages, spec.tools, ctx.deps.tool_format);
    const std::vector<ChatMessage> messages = pic_marked_messages(ctx, tp.messages);
    Result<tokenizer::TrackedText> text =
        ctx.deps.chat(messages, spec.add_generation_prompt, tp.tools, spec.chat_template_kwargs);
    if (!text.ok()) {
      out.error = ApiError::from_status(text.error(), "messages");
      return out;
    }
    // The completion needs max_tokens, or at least one token.
    if (std::optional<ApiError> e =
            refuse_if_provably_long(ctx, spec.kind, text->text, spec.max_tokens.value_or(1))) {
      out.error = std::move(e);
      return out;
    }
    PreparedPrompt p;
    p.think_tail = think_tail(*text);
    // Message contents are the plain spans: tokenized as text, never as special tokens.
    if (has_pic_marks(text->text)) {
      Result<PicTokens> pic = tokenize_pic(tok, *text);
      if (!pic.ok()) {
        out.error = ApiError::from_status(pic.error(), "messages");
        return out;
      }
      p.tokens = std::move(pic->tokens);
      p.pic_chunks = std::move(pic->chunks);
      p.text = strip_pic_marks(text->text);
    } else {
      p.tokens = tok.encode(*text, /*add_special=*/true, /*parse_special=*/true);
      p.text = std::move(text->text);
    }
    out.prompts.push_back(std::move(p));
  } else {
    for (const PromptInput& in : spec.prompts) {
      PreparedPrompt p;
      const bool extends_cache = !spec.prefix_tokens.empty();
      p.tokens = spec.prefix_tokens;
      if (in.is_tokens) {
        p.tokens.insert(p.tokens.end(), in.tokens.begin(), in.tokens.end());
        if (spec.echo) p.text = tok.decode(in.tokens, /*render_special=*/false);
      } else {
        const auto known = static_cast<int64_t>(spec.prefix_tokens.size());
        if (std::optional<ApiError> e = refuse_if_provably_long(
                ctx, spec.kind, in.text, known + spec.max_tokens.value_or(1))) {
          out.error = std::move(e);
          return out;
        }
        const std::vector<int32_t> own =
            tok.encode(in.text, /*add_special=*/!extends_cache, /*parse_special=*/true);
        p.tokens.insert(p.tokens.end(), own.begin(), own.end());
        p.text = in.text;
      }
      out.prompts.push_back(std::move(p));
    }
  }
  const int64_t max_len = ctx.deps.engine->max_model_len();
  for (PreparedPrompt& p : out.prompts) {
    const int64_t len = static_cast<int64_t>(p.tokens.size());
    if (len == 0) {
      out.error = ApiError::bad_request("The prompt is empty (it tokenizes to no tokens).",
                                        spec.kind == ApiKind::kChat ? "messages" : "prompt");
      return out;
    }
    if (spec.max_tokens) {
      if (len + *spec.max_tokens > max_len) {
        out.error = context_length_error(spec.kind, max_len, len, *spec.max_tokens);
        return out;
      }
      p.max_tokens = *spec.max_tokens;
    } else {
      if (len >= max_len) {
        out.error = context_length_error(spec.kind, max_len, len, std::nullopt);
        return out;
      }
      p.max_tokens = static_cast<int32_t>(std::min<int64_t>(max_len - len, INT32_MAX));
    }
  }
  return out;
}

}  // namespace keel::server
