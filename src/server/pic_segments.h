// Position-independent chunks in chat prompts (EPIC). A content part marked
// `"cache_control": {"type": "position_independent"}` — or, with `--pic auto`, every message
// before the last user message — is wrapped in marker strings before the chat template renders
// the conversation; the rendered text is then split at the markers and tokenized piece by piece:
// the text before the first chunk with the tokenizer's special tokens (BOS), each chunk with its
// own BOS (as EPIC compiles it), the text between and after chunks without. The engine receives
// the token spans of the chunks.
//
// The markers are control-character strings no template emits; a text that contains them
// unbalanced is a 400.
//
// Thread safety: pure functions (the tokenizer is thread-safe).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "kv/pic.h"
#include "tokenizer/tokenizer.h"

namespace keel::server {

inline constexpr std::string_view kPicBegin = "\x1e<keel-pic>\x1e";
inline constexpr std::string_view kPicEnd = "\x1e</keel-pic>\x1e";

std::string mark_pic(std::string_view text);
// The text without any markers.
std::string strip_pic_marks(std::string_view text);
// The same for a rendered prompt: its plain spans follow the bytes that remain.
tokenizer::TrackedText strip_pic_marks(const tokenizer::TrackedText& text);
[[nodiscard]] bool has_pic_marks(std::string_view text);

struct PicTokens {
  std::vector<int32_t> tokens;
  std::vector<kv::PicChunk> chunks;  // spans of `tokens`, each starting with BOS when it has one
};

// Splits `rendered` at the markers and tokenizes it as described above, control tokens parsed
// only outside its plain spans. InvalidArgument for unbalanced or nested markers.
Result<PicTokens> tokenize_pic(const tokenizer::Tokenizer& tok,
                               const tokenizer::TrackedText& rendered);

}  // namespace keel::server
