// A small generated SentencePiece-style vocabulary for random-weight models: <unk>, <s>, </s>,
// the 256 byte-fallback tokens, printable ASCII characters and a few hundred common English words
// (with every prefix, so the SPM merges can reach them). Any text tokenizes (bytes fall back), and
// a random model's output reads as word salad rather than binary noise.
#pragma once

#include <cstdint>

#include "gguf/writer.h"

namespace keel::model {

// Writes tokenizer.ggml.* keys into `w`; pads with <unused_N> tokens up to `min_size` tokens.
// Returns the vocabulary size.
int64_t add_byte_vocab(gguf::GgufWriter& w, int64_t min_size);

}  // namespace keel::model
