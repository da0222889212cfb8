// Test helper: small GGUF vocabularies built with GgufWriter, so tests can exercise the loader
// and the tokenizers on vocabularies whose every token and merge they control, including broken
// ones.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "gguf/writer.h"
#include "tokenizer/tokenizer.h"

namespace keel::tokenizer::testing {

// GGUF token types.
inline constexpr int32_t kNormal = 1;
inline constexpr int32_t kUnknownType = 2;
inline constexpr int32_t kControl = 3;
inline constexpr int32_t kUserDefined = 4;
inline constexpr int32_t kByteType = 6;

struct SyntheticVocab {
  std::string model = "llama";
  std::optional<std::string> pre;
  std::vector<std::string> tokens;
  std::vector<float> scores;        // omitted from the file when empty
  std::vector<int32_t> types;       // omitted from the file when empty
  std::vector<std::string> merges;  // written for model "gpt2" (unless omit_merges)
  bool omit_merges = false;

  // Appends a token (and its type and score, when the vocabulary has those arrays); returns its
  // id.
  int32_t add(const std::string& text, int32_t type = kNormal, float score = 0.0f);
};

// An SPM vocabulary: <unk>, <s>, </s>, the 256 byte tokens (ids 3..258), then nothing else.
SyntheticVocab spm_base();
// A byte-level BPE vocabulary: the 256 GPT-2 alphabet characters in byte order (id = byte).
SyntheticVocab bpe_base(const std::string& pre);

// The metadata of `v` in a writer; tests may add or override keys before writing.
gguf::GgufWriter to_writer(const SyntheticVocab& v);
// Writes `w` to a fresh temporary file and loads a tokenizer from it.
Result<Tokenizer> load_tokenizer(const gguf::GgufWriter& w);
Result<Tokenizer> load_tokenizer(const SyntheticVocab& v);

}  // namespace keel::tokenizer::testing
