// libFuzzer target: chat templates and their inputs through ChatTemplate (keel's Jinja2-subset
// engine: lexer, parser, interpreter, filters, methods). Input: template source, then optionally
// a NUL byte and a JSON object {"messages": [{role, content, ...}], "tools", "documents",
// "add_generation_prompt", "context": {extra variables}}; without it (or when it is not such an
// object) a fixed conversation is rendered. Render limits are smaller than the server's so that
// runaway templates stop quickly. Checks: no crash, the output stays within max_output_bytes,
// errors carry a message, rendering is deterministic (the clock is fixed), and render_tracked()
// gives the same text with well-formed plain spans.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"

namespace {

using keel::tokenizer::ChatMessage;
using keel::tokenizer::ChatRenderOptions;
using json = nlohmann::ordered_json;

std::vector<ChatMessage> default_messages() {
  std::vector<ChatMessage> m;
  m.push_back({"system", "You are terse.", nullptr});
  m.push_back({"user", "Hi <think>x</think> there", nullptr});
  m.push_back({"assistant", "Hello.", nullptr});
  m.push_back({"user", "Bye", nullptr});
  return m;
}

// Fills messages and options from the JSON half of the input; false when it has none usable.
bool parse_inputs(std::string_view text, std::vector<ChatMessage>* messages,
                  ChatRenderOptions* options) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  if (auto it = j.find("messages"); it != j.end() && it->is_array()) {
    for (const json& m : *it) {
      if (!m.is_object()) continue;
      ChatMessage c;
      if (auto r = m.find("role"); r != m.end() && r->is_string()) c.role = r->get<std::string>();
      if (auto t = m.find("content"); t != m.end() && t->is_string()) {
        c.content = t->get<std::string>();
      }
      c.extra = m;
      if (c.extra.contains("content") && c.extra["content"].is_string()) c.extra.erase("content");
      messages->push_back(std::move(c));
    }
  }
  if (auto it = j.find("tools"); it != j.end()) options->tools = *it;
  if (auto it = j.find("documents"); it != j.end()) options->documents = *it;
  if (auto it = j.find("add_generation_prompt"); it != j.end() && it->is_boolean()) {
    options->add_generation_prompt = it->get<bool>();
  }
  if (auto it = j.find("context"); it != j.end()) options->extra_context = *it;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view source = input.substr(0, nul);
  auto tmpl = keel::tokenizer::ChatTemplate::parse(source);
  if (!tmpl.ok()) {
    if (tmpl.error().message().empty()) std::abort();
    return 0;
  }
  ChatRenderOptions options;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  options.now = [] { return std::chrono::system_clock::time_point(std::chrono::hours(24 * 365)); };
  options.limits.max_output_bytes = 1 << 16;
  options.limits.max_work = 1 << 22;
  options.limits.max_steps = 20'000;
  options.limits.max_call_depth = 8;
  options.limits.max_value_depth = 32;
  std::vector<ChatMessage> messages;
  if (nul == std::string_view::npos || !parse_inputs(input.substr(nul + 1), &messages, &options)) {
    messages = default_messages();
  }
  auto out = tmpl->render(messages, options);
  if (!out.ok()) {
    if (out.error().message().empty()) std::abort();
    return 0;
  }
  if (out->size() > options.limits.max_output_bytes) std::abort();
  auto again = tmpl->render(messages, options);
  if (!again.ok() || *again != *out) std::abort();
  // The tracked render: the same text, and plain spans that are sorted, non-empty, disjoint,
  // not adjacent and inside the text (text_span.h).
  auto tracked = tmpl->render_tracked(messages, options);
  if (!tracked.ok() || tracked->text != *out) std::abort();
  size_t prev_end = 0;
  for (size_t i = 0; i < tracked->plain.size(); ++i) {
    const keel::tokenizer::TextSpan& s = tracked->plain[i];
    if (s.begin >= s.end || s.end > tracked->text.size()) std::abort();
    if (i > 0 && s.begin <= prev_end) std::abort();
    prev_end = s.end;
  }
  return 0;
}
