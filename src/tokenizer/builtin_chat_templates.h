// The chat templates keel ships under a name, for `--chat-template NAME` (as llama-server names
// its built-ins): keel's own Jinja text for each format, written for keel's jinja engine from the
// formats' published descriptions (no other project's template text). Each renders messages,
// add_generation_prompt, bos_token / eos_token and — where the format has them — tools, past tool
// calls and tool results in the wire syntax server::detect_tool_format recognizes, so the
// server's tool-call family follows the chosen template:
//   chatml       <|im_start|>role\ncontent<|im_end|>\n (the fallback; tools: keel's generic form)
//   llama2       [INST] turns, system prompt in <<SYS>> (tools: generic)
//   llama3       <|start_header_id|>role<|end_header_id|>\n\n…<|eot_id|>; tools as JSON in the
//                system turn, calls {"name", "parameters"}, results in `ipython` turns
//   mistral      [INST]…[/INST]; [AVAILABLE_TOOLS] before the last user turn, [TOOL_CALLS][…],
//                [TOOL_RESULTS]
//   gemma        <start_of_turn>user|model … <end_of_turn>; system text joins the first user turn
//   qwen2        ChatML with Hermes tools (<tools> in the system turn, <tool_call> blocks,
//                <tool_response> in user turns)
//   qwen3        qwen2 plus reasoning: past reasoning_content after the last user turn as
//                <think>…</think>; enable_thinking=false closes an empty <think> block in the
//                generation prompt
//   deepseek-r1  <｜User｜>/<｜Assistant｜> turns; the generation prompt opens <think> (closed at
//                once with enable_thinking=false); past reasoning is dropped (tools: generic)
// Thread safety: pure functions over constant text.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace keel::tokenizer {

// The names above, in that order.
[[nodiscard]] std::span<const std::string_view> builtin_chat_template_names();

// The template text of `name`; nullopt when keel has no template of that name.
[[nodiscard]] std::optional<std::string> builtin_chat_template_source(std::string_view name);

}  // namespace keel::tokenizer
