// SentencePiece-BPE encoding of one raw-text fragment, as llama.cpp's SPM tokenizer: the text is
// cut into UTF-8 characters (by lead byte), then the adjacent pair whose concatenation is the
// highest-scoring vocabulary token is merged repeatedly (ties: leftmost first), driven by a
// priority queue (O(n log n)). A final piece that is not a token falls back to its bytes
// (<0xXX> tokens; then a one-byte token; then <unk>).
//
// Thread safety: pure function of its arguments.
#pragma once

#include <array>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace keel::tokenizer {

// The token for each byte value in byte fallback (kNoToken when the vocabulary has none).
using ByteTokens = std::array<TokenId, 256>;

// Appends the tokens of `text` (spaces already escaped to U+2581 by the caller) to `out`.
void spm_encode(const Vocab& vocab, const ByteTokens& byte_tokens, std::string_view text,
                std::vector<TokenId>* out);

}  // namespace keel::tokenizer
