// Chat training data: OpenAI's fine-tuning JSONL — one conversation per line,
// {"messages": [{"role", "content", ...}, ...], "tools": [...] (optional)} with an optional
// "weight": 0 | 1 on assistant messages — rendered through the model's chat template as the
// server renders a chat request (tokenizer::ChatTemplate with the vocabulary's BOS/EOS texts,
// message fields name / tool_calls / tool_call_id, tool-call arguments parsed to JSON, plain
// spans, never a double BOS) and tokenized, with the loss mask on the assistant turns of weight 1
// (the default): each turn's tokens from the end of the prompt that precedes it (the render of
// the earlier messages with the generation prompt) through its end of turn (the render up to and
// including it), the turn's own end-of-turn markup included.
//
// A turn's boundaries are found by rendering prefixes of the conversation, so the template must
// render a conversation's prefix as a prefix of the whole (most do; one that rewrites earlier
// turns, e.g. by dropping their reasoning, is refused with the line named). Where tokenizing
// at a boundary merges characters across it, the boundary moves to the first token that
// differs.
//
// Errors name the line (1-based) and the message at fault. Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/file_system.h"
#include "core/result.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "train/model_pass.h"

namespace keel::train {

// The tokens [begin, end) of one trained assistant turn.
struct TurnSpan {
  int64_t begin = 0;
  int64_t end = 0;
};

struct ChatExample {
  int64_t line = 0;             // in the JSONL file
  TrainSequence seq;            // tokens and the loss mask
  std::vector<TurnSpan> turns;  // the trained turns, in order
  bool truncated = false;       // the conversation was longer than max_tokens and was cut
};

struct ChatDataOptions {
  int64_t max_tokens = 0;  // conversations are cut to this many tokens (the model's context)
};

struct ChatDataset {
  std::vector<ChatExample> examples;
  int64_t num_tokens = 0;     // Σ tokens of every example
  int64_t num_targets = 0;    // Σ trained targets
  int64_t num_truncated = 0;  // examples cut to max_tokens
};

// Parses and renders every non-blank line of `jsonl`. InvalidArgument "line N: ..." for a line
// that is not a JSON object, lacks messages, has a message without a role or with content of the
// wrong type, a weight other than 0 or 1 or on a non-assistant message, no assistant message of
// weight 1, or that the template rejects; InvalidArgument when the file has no conversation.
Result<ChatDataset> parse_chat_jsonl(std::string_view jsonl, const tokenizer::ChatTemplate& tmpl,
                                     const tokenizer::Tokenizer& tok,
                                     const ChatDataOptions& options);

// The whole file at `path` through `fs` (the CLI's JSONL files).
Result<std::string> read_text_file(FileSystem& fs, const std::string& path);

}  // namespace keel::train
