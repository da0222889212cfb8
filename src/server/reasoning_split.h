// Reasoning output (`--reasoning-parser`): a reasoning model's generated text split into its
// thinking and its answer, as vLLM's reasoning parsers and llama-server's reasoning format do. The
// thinking goes to `reasoning_content` (llama-server, the AI SDK) and `reasoning` (vLLM's newer
// name) of a chat message or stream delta; the answer is the content, and the only text tool calls
// are parsed from. Rules (Qwen3 / DeepSeek-R1 `<think>` style):
//   - The output starts inside the thinking when the template's generation prompt opened <think>
//     without closing it (think_tail() = kOpen: DeepSeek-R1, Qwen3-Thinking), or — deepseek-r1
//     only — when the prompt did not close one either (kNone: R1 models think first). Otherwise
//     (qwen3; or a prompt that closed an empty block, enable_thinking=false) it starts in content,
//     and enters the thinking only when its first non-space text is <think>.
//   - Inside the thinking an opening <think> (the model writing it itself) is dropped; the thinking
//     ends at the first </think>; everything after it is content (a later <think> too).
//   - Whitespace at both ends of the thinking and before the content that follows </think> is
//     dropped; an output that never enters the thinking is content unchanged, whitespace and all.
//   - A thinking the model never closes (max_tokens, a stop string, EOS) is all reasoning: the
//     content is empty.
// Streaming: push() releases text as soon as it cannot be part of a tag — a tag split across
// tokens (or inside one) is held until decided — and whitespace at the thinking's edges is held
// until something follows it; push()s then finish() give what split_reasoning gives for the whole
// text, whatever the chunking.
//
// Thread safety: ReasoningSplitter is a value with one owner; the functions are pure.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"
#include "tokenizer/text_span.h"

namespace keel::server {

enum class ReasoningParser { kNone, kQwen3, kDeepSeekR1 };

// "none" | "qwen3" | "deepseek-r1" (vLLM's names). InvalidArgument naming the value otherwise.
Result<ReasoningParser> parse_reasoning_parser(std::string_view name);
[[nodiscard]] std::string_view reasoning_parser_name(ReasoningParser parser);

// How the rendered prompt's last stretch of template markup (after its last plain span — the
// generation prompt) leaves <think>: opened and not closed, closed, or neither.
enum class ThinkTail { kNone, kOpen, kClosed };
[[nodiscard]] ThinkTail think_tail(const tokenizer::TrackedText& prompt);

// Whether the output of a prompt with `tail` starts inside the thinking (rules above).
[[nodiscard]] bool starts_in_reasoning(ReasoningParser parser, ThinkTail tail);

struct ReasoningParts {
  std::string reasoning;
  std::string content;
};

class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(bool in_reasoning);

  // More generated text: the parts that are decided.
  ReasoningParts push(std::string_view text);
  // At the end of the output: what was held.
  ReasoningParts finish();

 private:
  enum class State {
    kStart,           // content first: leading spaces, maybe the start of <think>
    kReasoningStart,  // thinking: leading spaces and an optional <think>
    kReasoning,       // thinking, until </think>
    kContentStart,    // after </think>: spaces dropped
    kContent,         // everything else is content
  };
  void step(ReasoningParts* out);

  State state_;
  bool open_tag_seen_ = false;  // kReasoningStart: a <think> was dropped already
  std::string held_;
};

// The whole output at once (the non-streamed response).
[[nodiscard]] ReasoningParts split_reasoning(std::string_view text, bool in_reasoning);

}  // namespace keel::server
