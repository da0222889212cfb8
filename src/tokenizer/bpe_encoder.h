// Byte-level BPE encoding of one raw-text fragment, as llama.cpp's BPE tokenizer: the text is
// split into pre-tokens by the vocabulary's regexes, each pre-token's bytes are mapped to the
// GPT-2 byte alphabet, and within each pre-token the adjacent pair with the lowest merge rank is
// merged repeatedly (ties: leftmost first; priority queue plus a hash map of ranks). With
// ignore_merges, a pre-token that is itself a token is emitted whole. A final piece that is not a
// token falls back to the tokens of its single bytes, where they exist (llama.cpp's behaviour).
//
// Invalid UTF-8 in the input is first rewritten as llama.cpp does (each bad byte -> U+FFFD).
// Thread safety: pure function of its arguments.
#pragma once

#include <string_view>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocab.h"

namespace keel::tokenizer {

void bpe_encode(const Vocab& vocab, const PreTokenizer& pre_tokenizer, std::string_view text,
                std::vector<TokenId>* out);

}  // namespace keel::tokenizer
