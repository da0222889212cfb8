// keel's built-in chat templates (see builtin_chat_templates.h). The generic-tool templates
// (chatml, llama2, gemma, deepseek-r1) never mention the word the tool-format detection looks for,
// so the server describes tools for them in the system prompt itself.
#include "tokenizer/builtin_chat_templates.h"

#include <array>

namespace keel::tokenizer {
namespace {

// ChatML: every message as <|im_start|>role\ncontent<|im_end|>\n.
constexpr std::string_view kChatMl = R"jinja({#- ChatML -#}
{%- for message in messages -%}
  {{- '<|im_start|>' ~ message.role ~ '\n' ~ message.content ~ '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|im_start|>assistant\n' -}}
{%- endif -%})jinja";

// Llama 2 chat: [INST] turns, the system prompt folded into the first user turn inside
// <<SYS>> markers, each user turn opened by BOS and each assistant turn closed by EOS.
constexpr std::string_view kLlama2 = R"jinja({#- Llama 2 chat -#}
{%- set ns = namespace(system='', turns=messages) -%}
{%- if messages and messages[0].role == 'system' -%}
  {%- set ns.system = messages[0].content -%}
  {%- set ns.turns = messages[1:] -%}
{%- endif -%}
{%- for m in ns.turns -%}
  {%- if (m.role == 'user') != (loop.index0 is even) -%}
    {{- raise_exception('Llama 2 chat needs user and assistant turns alternating, user first') -}}
  {%- endif -%}
  {%- if m.role == 'user' -%}
    {%- set text = m.content -%}
    {%- if loop.first and ns.system -%}
      {%- set text = '<<SYS>>\n' ~ ns.system ~ '\n<</SYS>>\n\n' ~ text -%}
    {%- endif -%}
    {{- bos_token ~ '[INST] ' ~ text | trim ~ ' [/INST]' -}}
  {%- else -%}
    {{- ' ' ~ m.content | trim ~ ' ' ~ eos_token -}}
  {%- endif -%}
{%- endfor -%})jinja";

// Llama 3: header-delimited turns; functions as JSON lines in the system turn; a call is the
// whole assistant turn {"name", "parameters"}; results come back in `ipython` turns.
constexpr std::string_view kLlama3 = R"jinja({#- keel's Llama 3 chat template -#}
{{- bos_token -}}
{%- set ns = namespace(first=0, system='') -%}
{%- if messages and messages[0].role in ['system', 'developer'] -%}
  {%- set ns.system = messages[0].content -%}
  {%- set ns.first = 1 -%}
{%- endif -%}
{%- if ns.first or tools -%}
  {{- '<|start_header_id|>system<|end_header_id|>\n\n' -}}
  {%- if tools -%}
    {{- 'You may call functions. To call one, reply with only a JSON object {"name": <function name>, "parameters": <arguments object>}. The functions:\n' -}}
    {%- for t in tools -%}
      {{- t | tojson ~ '\n' -}}
    {%- endfor -%}
    {%- if ns.system -%}
      {{- '\n' -}}
    {%- endif -%}
  {%- endif -%}
  {{- ns.system ~ '<|eot_id|>' -}}
{%- endif -%}
{%- for m in messages[ns.first:] -%}
  {%- if m.role == 'assistant' and m.tool_calls -%}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
    {%- for c in m.tool_calls -%}
      {%- set args = c.function.arguments -%}
      {{- '{"name": "' ~ c.function.name ~ '", "parameters": ' ~ (args if args is string else args | tojson) ~ '}' -}}
    {%- endfor -%}
    {{- '<|eot_id|>' -}}
  {%- elif m.role == 'tool' -%}
    {{- '<|start_header_id|>ipython<|end_header_id|>\n\n' ~ m.content ~ '<|eot_id|>' -}}
  {%- else -%}
    {{- '<|start_header_id|>' ~ m.role ~ '<|end_header_id|>\n\n' ~ (m.content or '') | trim ~ '<|eot_id|>' -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
{%- endif -%})jinja";

// Mistral instruct: [INST] turns (the system text joins the last user turn), functions in
// [AVAILABLE_TOOLS] before the last user turn, calls after [TOOL_CALLS] with their ids, results
// in [TOOL_RESULTS]. The [/INST] of the last user turn is the generation prompt.
constexpr std::string_view kMistral = R"jinja({#- keel's Mistral instruct template -#}
{{- bos_token -}}
{%- set ns = namespace(system='', last_user=-1) -%}
{%- for m in messages -%}
  {%- if m.role in ['system', 'developer'] -%}
    {%- set ns.system = m.content -%}
  {%- elif m.role == 'user' -%}
    {%- set ns.last_user = loop.index0 -%}
  {%- endif -%}
{%- endfor -%}
{%- for m in messages -%}
  {%- if m.role == 'user' -%}
    {%- if loop.index0 == ns.last_user -%}
      {%- if tools -%}
        {{- '[AVAILABLE_TOOLS]' ~ (tools | tojson) ~ '[/AVAILABLE_TOOLS]' -}}
      {%- endif -%}
      {{- '[INST]' ~ (ns.system ~ '\n\n' if ns.system else '') ~ m.content ~ '[/INST]' -}}
    {%- else -%}
      {{- '[INST]' ~ m.content ~ '[/INST]' -}}
    {%- endif -%}
  {%- elif m.role == 'assistant' -%}
    {%- if m.tool_calls -%}
      {{- '[TOOL_CALLS][' -}}
      {%- for c in m.tool_calls -%}
        {%- set args = c.function.arguments -%}
        {{- '{"name": "' ~ c.function.name ~ '", "arguments": ' ~ (args if args is string else args | tojson) ~ ', "id": "' ~ c.id ~ '"}' -}}
        {%- if not loop.last -%}
          {{- ', ' -}}
        {%- endif -%}
      {%- endfor -%}
      {{- ']' ~ eos_token -}}
    {%- else -%}
      {{- (m.content or '') ~ eos_token -}}
    {%- endif -%}
  {%- elif m.role == 'tool' -%}
    {{- '[TOOL_RESULTS]{"call_id": "' ~ (m.tool_call_id | default('')) ~ '", "content": ' ~ (m.content | tojson) ~ '}[/TOOL_RESULTS]' -}}
  {%- endif -%}
{%- endfor -%})jinja";

// Gemma: user and model turns only; system text joins the next user turn.
constexpr std::string_view kGemma = R"jinja({#- keel's Gemma template -#}
{{- bos_token -}}
{%- set ns = namespace(system='') -%}
{%- for m in messages -%}
  {%- if m.role in ['system', 'developer'] -%}
    {%- set ns.system = ns.system ~ m.content ~ '\n\n' -%}
  {%- else -%}
    {%- set role = 'model' if m.role == 'assistant' else 'user' -%}
    {%- set text = m.content or '' -%}
    {%- if role == 'user' and ns.system -%}
      {%- set text = ns.system ~ text -%}
      {%- set ns.system = '' -%}
    {%- endif -%}
    {{- '<start_of_turn>' ~ role ~ '\n' ~ text | trim ~ '<end_of_turn>\n' -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<start_of_turn>model\n' -}}
{%- endif -%})jinja";

// DeepSeek-R1: the system text first, then <｜User｜> / <｜Assistant｜> turns; a past answer
// keeps only what follows its </think>; the generation prompt opens <think>.
constexpr std::string_view kDeepSeekR1 = R"jinja({#- keel's DeepSeek-R1 template -#}
{{- bos_token -}}
{%- for m in messages -%}
  {%- if m.role in ['system', 'developer'] -%}
    {{- m.content -}}
  {%- endif -%}
{%- endfor -%}
{%- for m in messages -%}
  {%- if m.role == 'user' -%}
    {{- '<｜User｜>' ~ m.content -}}
  {%- elif m.role == 'assistant' -%}
    {{- '<｜Assistant｜>' ~ (m.content or '').split('</think>')[-1] | trim ~ '<｜end▁of▁sentence｜>' -}}
  {%- elif m.role == 'tool' -%}
    {{- '<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' ~ m.content ~ '<｜tool▁output▁end｜><｜tool▁outputs▁end｜>' -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<｜Assistant｜><think>\n' -}}
  {%- if enable_thinking is defined and enable_thinking is false -%}
    {{- '</think>\n\n' -}}
  {%- endif -%}
{%- endif -%})jinja";

// Qwen (2 and 3): ChatML with Hermes function calling. The three parts around the assistant
// turn are shared; qwen3 adds the reasoning pieces.
constexpr std::string_view kQwenHead = R"jinja({#- keel's Qwen template -#}
{%- set ns = namespace(first=0, last_user=-1) -%}
{%- if messages and messages[0].role in ['system', 'developer'] -%}
  {%- set ns.first = 1 -%}
{%- endif -%}
{%- if ns.first or tools -%}
  {{- '<|im_start|>system\n' -}}
  {%- if ns.first -%}
    {{- messages[0].content -}}
  {%- endif -%}
  {%- if tools -%}
    {%- if ns.first -%}
      {{- '\n\n' -}}
    {%- endif -%}
    {{- '# Tools\n\nYou may call functions. Their signatures, one per line:\n<tools>\n' -}}
    {%- for t in tools -%}
      {{- t | tojson ~ '\n' -}}
    {%- endfor -%}
    {{- '</tools>\n\nTo call one, write for each call a block <tool_call>\n{"name": <function name>, "arguments": <arguments object>}\n</tool_call>' -}}
  {%- endif -%}
  {{- '<|im_end|>\n' -}}
{%- endif -%}
{%- for m in messages -%}
  {%- if m.role == 'user' -%}
    {%- set ns.last_user = loop.index0 -%}
  {%- endif -%}
{%- endfor -%}
{%- for m in messages -%}
  {%- if loop.index0 < ns.first -%}
  {%- elif m.role == 'assistant' -%}
    {{- '<|im_start|>assistant\n' -}}
)jinja";

constexpr std::string_view kQwen3PastReasoning = R"jinja(
    {%- if m.reasoning_content and loop.index0 > ns.last_user -%}
      {{- '<think>\n' ~ m.reasoning_content | trim ~ '\n</think>\n\n' -}}
    {%- endif -%}
)jinja";

constexpr std::string_view kQwenTurns = R"jinja(
    {{- m.content or '' -}}
    {%- for c in m.tool_calls or [] -%}
      {%- if m.content or not loop.first -%}
        {{- '\n' -}}
      {%- endif -%}
      {%- set args = c.function.arguments -%}
      {{- '<tool_call>\n{"name": "' ~ c.function.name ~ '", "arguments": ' ~ (args if args is string else args | tojson) ~ '}\n</tool_call>' -}}
    {%- endfor -%}
    {{- '<|im_end|>\n' -}}
  {%- elif m.role == 'tool' -%}
    {%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}
      {{- '<|im_start|>user' -}}
    {%- endif -%}
    {{- '\n<tool_response>\n' ~ m.content ~ '\n</tool_response>' -}}
    {%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}
      {{- '<|im_end|>\n' -}}
    {%- endif -%}
  {%- else -%}
    {{- '<|im_start|>' ~ m.role ~ '\n' ~ m.content ~ '<|im_end|>\n' -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|im_start|>assistant\n' -}}
)jinja";

constexpr std::string_view kQwen3NoThinking = R"jinja(
  {%- if enable_thinking is defined and enable_thinking is false -%}
    {{- '<think>\n\n</think>\n\n' -}}
  {%- endif -%}
)jinja";

constexpr std::string_view kQwenTail = "{%- endif -%}";

constexpr std::array<std::string_view, 8> kNames = {"chatml", "llama2", "llama3", "mistral",
                                                    "gemma",  "qwen2",  "qwen3",  "deepseek-r1"};

std::string qwen(bool reasoning) {
  std::string s(kQwenHead);
  if (reasoning) s += kQwen3PastReasoning;
  s += kQwenTurns;
  if (reasoning) s += kQwen3NoThinking;
  s += kQwenTail;
  return s;
}

}  // namespace

std::span<const std::string_view> builtin_chat_template_names() { return kNames; }

std::optional<std::string> builtin_chat_template_source(std::string_view name) {
  if (name == "chatml") return std::string(kChatMl);
  if (name == "llama2") return std::string(kLlama2);
  if (name == "llama3") return std::string(kLlama3);
  if (name == "mistral") return std::string(kMistral);
  if (name == "gemma") return std::string(kGemma);
  if (name == "qwen2") return qwen(/*reasoning=*/false);
  if (name == "qwen3") return qwen(/*reasoning=*/true);
  if (name == "deepseek-r1") return std::string(kDeepSeekR1);
  return std::nullopt;
}

}  // namespace keel::tokenizer
