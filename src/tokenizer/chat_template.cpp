// ChatTemplate: the built-in templates (builtin_chat_templates.h), GGUF loading with the ChatML
// fallback, the render variables, and the BOS rule (see chat_template.h).
#include "tokenizer/chat_template.h"

#include "core/check.h"
#include "core/log.h"
#include "jinja/json_text.h"
#include "jinja/plain_spans.h"
#include "tokenizer/builtin_chat_templates.h"

namespace keel::tokenizer {
namespace {

constexpr int kMaxJsonDepth = 64;  // nesting accepted in tools, tool calls and extra context

ChatTemplate must_parse(std::string_view source) {
  auto t = ChatTemplate::parse(source);
  KEEL_CHECK_MSG(t.ok(), "built-in chat template does not parse");
  return std::move(t).value();
}

Result<jinja::Value> json_value(const nlohmann::ordered_json& j, std::string_view what) {
  auto v = jinja::value_from_json(j, kMaxJsonDepth);
  if (!v.ok()) return v.error().with_prefix(std::string(what));
  return v;
}

// Everything but the role came from the request: plain text (see text_span.h).
Result<jinja::Value> message_value(const ChatMessage& m, size_t index) {
  jinja::Dict d;
  d.set("role", jinja::Value(m.role));
  d.set("content", jinja::Value::plain(m.content));
  if (!m.extra.is_null()) {
    if (!m.extra.is_object()) {
      return Status::invalid_argument("chat template: messages[" + std::to_string(index) +
                                      "].extra must be a JSON object");
    }
    for (auto it = m.extra.begin(); it != m.extra.end(); ++it) {
      if (it.key() == "role") continue;
      KEEL_ASSIGN_OR_RETURN(jinja::Value v,
                            json_value(it.value(), "chat template: messages[" +
                                                       std::to_string(index) + "]." + it.key()));
      d.set(it.key(), jinja::mark_plain(v));
    }
  }
  return jinja::Value(std::move(d));
}

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  auto t = jinja::Template::parse(source);
  if (!t.ok()) return t.error().with_prefix("chat template");
  return ChatTemplate(std::string(source), std::move(t).value());
}

ChatTemplate ChatTemplate::chatml() { return must_parse(*builtin_chat_template_source("chatml")); }

ChatTemplate ChatTemplate::llama2() { return must_parse(*builtin_chat_template_source("llama2")); }

std::optional<ChatTemplate> ChatTemplate::builtin(std::string_view name) {
  std::optional<std::string> source = builtin_chat_template_source(name);
  if (!source) return std::nullopt;
  return must_parse(*source);
}

ChatTemplate ChatTemplate::from_gguf(const gguf::GgufFile& file) {
  auto text = file.get_string("tokenizer.chat_template");
  std::string reason;
  if (text.ok()) {
    auto t = parse(*text);
    if (t.ok()) return std::move(t).value();
    reason = t.error().message();
  } else {
    reason = text.error().code() == StatusCode::kNotFound ? "no tokenizer.chat_template"
                                                          : text.error().message();
  }
  KEEL_LOG_WARN("{}: {}; using the ChatML chat template", file.path(), reason);
  ChatTemplate fallback = chatml();
  fallback.fallback_ = true;
  return fallback;
}

Result<std::string> ChatTemplate::render(std::span<const ChatMessage> messages,
                                         bool add_generation_prompt, const std::string& bos_token,
                                         const std::string& eos_token) const {
  ChatRenderOptions options;
  options.add_generation_prompt = add_generation_prompt;
  options.bos_token = bos_token;
  options.eos_token = eos_token;
  return render(messages, options);
}

Result<std::string> ChatTemplate::render(std::span<const ChatMessage> messages,
                                         const ChatRenderOptions& options) const {
  KEEL_ASSIGN_OR_RETURN(TrackedText out, render_tracked(messages, options));
  return std::move(out.text);
}

Result<TrackedText> ChatTemplate::render_tracked(std::span<const ChatMessage> messages,
                                                 const ChatRenderOptions& options) const {
  jinja::Dict vars;
  if (!options.extra_context.is_null()) {
    if (!options.extra_context.is_object()) {
      return Status::invalid_argument("chat template: extra_context must be a JSON object");
    }
    for (auto it = options.extra_context.begin(); it != options.extra_context.end(); ++it) {
      KEEL_ASSIGN_OR_RETURN(jinja::Value v, json_value(it.value(), "chat template: " + it.key()));
      vars.set(it.key(), std::move(v));
    }
  }
  if (!options.template_kwargs.is_null()) {
    if (!options.template_kwargs.is_object()) {
      return Status::invalid_argument("chat template: chat_template_kwargs must be a JSON object");
    }
    for (auto it = options.template_kwargs.begin(); it != options.template_kwargs.end(); ++it) {
      if (is_reserved_variable(it.key())) {
        return Status::invalid_argument("chat template: chat_template_kwargs may not set `" +
                                        it.key() + "` (the server sets it)");
      }
      KEEL_ASSIGN_OR_RETURN(jinja::Value v, json_value(it.value(), "chat template: " + it.key()));
      vars.set(it.key(), jinja::mark_plain(v));
    }
  }
  jinja::Value::List list;
  list.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    KEEL_ASSIGN_OR_RETURN(jinja::Value m, message_value(messages[i], i));
    list.push_back(std::move(m));
  }
  vars.set("messages", jinja::Value(std::move(list)));
  KEEL_ASSIGN_OR_RETURN(jinja::Value tools, json_value(options.tools, "chat template: tools"));
  vars.set("tools", jinja::mark_plain(tools));
  KEEL_ASSIGN_OR_RETURN(jinja::Value docs,
                        json_value(options.documents, "chat template: documents"));
  vars.set("documents", jinja::mark_plain(docs));
  vars.set("add_generation_prompt", jinja::Value(options.add_generation_prompt));
  vars.set("bos_token", jinja::Value(options.bos_token));
  vars.set("eos_token", jinja::Value(options.eos_token));
  jinja::RenderEnv env;
  env.now = options.now;
  env.limits = options.limits;
  auto out = tmpl_.render_tracked(vars, env);
  if (!out.ok()) return out.error().with_prefix("chat template");
  return out;
}

bool is_reserved_variable(std::string_view name) {
  return name == "messages" || name == "tools" || name == "documents" ||
         name == "add_generation_prompt" || name == "bos_token" || name == "eos_token";
}

std::string bos_text(const Tokenizer& tokenizer) {
  return tokenizer.bos_id() < 0 ? "" : std::string(tokenizer.token_text(tokenizer.bos_id()));
}

std::string eos_text(const Tokenizer& tokenizer) {
  return tokenizer.eos_id() < 0 ? "" : std::string(tokenizer.token_text(tokenizer.eos_id()));
}

bool rendered_starts_with_bos(std::string_view prompt, const Tokenizer& tokenizer) {
  if (tokenizer.bos_id() < 0) return false;
  std::string_view bos = tokenizer.token_text(tokenizer.bos_id());
  return !bos.empty() && prompt.substr(0, bos.size()) == bos;
}

std::string_view prompt_for_tokenizer(std::string_view prompt, const Tokenizer& tokenizer) {
  if (tokenizer.add_bos() && rendered_starts_with_bos(prompt, tokenizer)) {
    return prompt.substr(tokenizer.token_text(tokenizer.bos_id()).size());
  }
  return prompt;
}

TrackedText prompt_for_tokenizer(TrackedText prompt, const Tokenizer& tokenizer) {
  const size_t cut = prompt.text.size() - prompt_for_tokenizer(prompt.text, tokenizer).size();
  if (cut == 0) return prompt;
  // A BOS written by the user (inside a plain span) is text, not the template's BOS: keep it.
  if (overlaps(prompt.plain, 0, cut)) return prompt;
  return tracked_substr(prompt, cut, prompt.text.size());
}

}  // namespace keel::tokenizer
