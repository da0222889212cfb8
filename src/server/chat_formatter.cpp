// template_chat_formatter (see chat_formatter.h).
#include "server/chat_formatter.h"

#include <utility>
#include <vector>

namespace keel::server {

ChatFormatter template_chat_formatter(std::shared_ptr<const tokenizer::ChatTemplate> tmpl,
                                      const tokenizer::Tokenizer* tok) {
  return [tmpl = std::move(tmpl), tok, bos = tokenizer::bos_text(*tok),
          eos = tokenizer::eos_text(*tok)](
             std::span<const ChatMessage> messages, bool add_generation_prompt,
             const nlohmann::ordered_json& tools,
             const nlohmann::ordered_json& template_kwargs) -> Result<tokenizer::TrackedText> {
    std::vector<tokenizer::ChatMessage> msgs;
    msgs.reserve(messages.size());
    for (const ChatMessage& m : messages) {
      tokenizer::ChatMessage c{m.role, m.content, nullptr};
      if (!m.name.empty()) c.extra["name"] = m.name;
      if (!m.tool_call_id.empty()) c.extra["tool_call_id"] = m.tool_call_id;
      if (!m.tool_calls.is_null()) c.extra["tool_calls"] = m.tool_calls;
      if (m.reasoning_content) c.extra["reasoning_content"] = *m.reasoning_content;
      msgs.push_back(std::move(c));
    }
    tokenizer::ChatRenderOptions options;
    options.add_generation_prompt = add_generation_prompt;
    options.bos_token = bos;
    options.eos_token = eos;
    options.tools = tools;
    options.template_kwargs = template_kwargs;
    KEEL_ASSIGN_OR_RETURN(tokenizer::TrackedText text, tmpl->render_tracked(msgs, options));
    return tokenizer::prompt_for_tokenizer(std::move(text), *tok);
  };
}

}  // namespace keel::server
