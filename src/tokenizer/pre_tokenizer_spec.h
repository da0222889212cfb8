// Pre-tokenizer specifications for byte-level BPE vocabularies: which `tokenizer.ggml.pre` names
// keel knows, the regex sequence each one splits text with, and the decoding/encoding flags that
// llama.cpp ties to the name (clean_spaces, ignore_merges, add_bos).
//
// A regex sequence is applied in order: every regex splits each piece left by the previous one
// into its matches and the unmatched text between them (both kept, as llama.cpp does).
// Thread safety: constant data.
#pragma once

#include <span>
#include <string_view>

namespace keel::tokenizer {

enum class PreTokenizerKind {
  kDefault,        // no or "default" pre: punctuation runs, GPT-2 words, digit runs, 3 digits
  kGpt2,           // gpt-2, mpt, olmo, jais, ...
  kLlama3,         // llama3 / llama-bpe (Llama 3), dbrx, smaug-bpe, chatglm-bpe
  kQwen2,          // qwen2, stablelm2, megrez, hunyuan, grok-2, ...
  kQwen35,         // qwen35 (letters keep their combining marks)
  kDeepseekLlm,    // deepseek-llm
  kDeepseekCoder,  // deepseek-coder
  kFalcon,         // falcon
  kStarcoder,      // starcoder, refact, command-r, smollm, codeshell, exaone, minerva-7b
  kBloom,          // bloom, poro-chat, gpt3-finnish
  kViking,         // viking
};

struct PreTokenizerSpec {
  std::string_view name;  // the tokenizer.ggml.pre value
  PreTokenizerKind kind;
  bool clean_spaces;   // decode cleans " ," etc. (llama.cpp's clean_spaces)
  bool ignore_merges;  // a pre-token that is already a token is emitted whole
  bool add_bos;        // default for add_bos when tokenizer.ggml.add_bos_token is absent
  bool no_bos;         // the model has no BOS token by default (chatglm)
};

// The spec for `pre`, or nullptr when keel does not know it. An empty `pre` (key absent) is
// not looked up here: the caller falls back to kDefault with a warning, like llama.cpp.
const PreTokenizerSpec* find_pre_tokenizer_spec(std::string_view pre);

// The regexes (PCRE2 syntax, UTF-8) applied for `kind`, in order.
std::span<const std::string_view> pre_tokenizer_regexes(PreTokenizerKind kind);

// Every known pre-tokenizer name (for error messages and tests).
std::span<const PreTokenizerSpec> known_pre_tokenizers();

}  // namespace keel::tokenizer
