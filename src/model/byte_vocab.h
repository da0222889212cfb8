// A small generated SentencePiece-style vocabulary for random-weight models: <unk>, <s>, </s>,
// the 256 byte-fallback tokens, printable ASCII characters and a few hundred common English words
// (with every prefix, so the SPM merges can reach them). Any text tokenizes (bytes fall back), and
// a random model's output reads as word salad rather than binary noise.
#pragma once

#include <cstdint>

#include "gguf/writer.h"

namespace keel::model {

struct ByteVocabInfo {
  int64_t n_vocab;      // tokens written
  int64_t words_begin;  // [words_begin, words_end): the text pieces (characters and words);
  int64_t words_end;    // before them specials and bytes, after them <unused_N> padding
};

// Writes tokenizer.ggml.* keys into `w`; pads with <unused_N> tokens up to `min_size` tokens.
ByteVocabInfo add_byte_vocab(gguf::GgufWriter& w, int64_t min_size);

}  // namespace keel::model
