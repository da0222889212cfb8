// Vocab: everything a tokenizer knows about its vocabulary, read from GGUF `tokenizer.ggml.*`
// metadata by load_vocab() with llama.cpp's defaults and fix-ups (default special ids per model,
// add_bos/add_eos, EOG detection by token text, control-looking tokens promoted to control,
// per-model attributes such as Phi-3's rstrip).
//
// Invariants after load_vocab(): tokens is non-empty; token_to_id is its exact inverse (texts are
// unique); every special id is -1 or a valid index; merge ranks are unique per pair.
// Thread safety: immutable after loading; share freely for reading.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "gguf/reader.h"
#include "tokenizer/pre_tokenizer_spec.h"

namespace keel::tokenizer {

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

enum class VocabType {
  kSpm,  // tokenizer.ggml.model = "llama": SentencePiece BPE over code points, byte fallback
  kBpe,  // tokenizer.ggml.model = "gpt2": byte-level BPE with a regex pre-tokenizer
};

// Token attribute bits, as llama.cpp's llama_token_attr. GGUF token types map to one bit each;
// loading may add more (control for EOG-looking tokens, lstrip/rstrip per model).
enum class TokenAttr : uint32_t {
  kUndefined = 0,
  kUnknown = 1u << 0,
  kUnused = 1u << 1,
  kNormal = 1u << 2,
  kControl = 1u << 3,
  kUserDefined = 1u << 4,
  kByte = 1u << 5,
  kNormalized = 1u << 6,
  kLstrip = 1u << 7,  // a special-token match also swallows the whitespace before it
  kRstrip = 1u << 8,  // ... and after it
  kSingleWord = 1u << 9,
};
constexpr uint32_t bit(TokenAttr a) { return static_cast<uint32_t>(a); }

struct TokenData {
  std::string text;    // as stored in the vocabulary ("▁the", "Ġthe", "<0x0A>", "<s>")
  float score = 0.0f;  // SPM merge priority (higher merges first); 0 when the file has none
  uint32_t attrs = 0;  // TokenAttr bits
};

struct SpecialTokenIds {  // kNoToken (-1) when the vocabulary has none
  TokenId bos = kNoToken;
  TokenId eos = kNoToken;
  TokenId eot = kNoToken;  // end of turn
  TokenId eom = kNoToken;  // end of message (tool call)
  TokenId unk = kNoToken;
  TokenId sep = kNoToken;
  TokenId pad = kNoToken;
  TokenId mask = kNoToken;
  TokenId fim_pre = kNoToken;
  TokenId fim_suf = kNoToken;
  TokenId fim_mid = kNoToken;
  TokenId fim_pad = kNoToken;
  TokenId fim_rep = kNoToken;
  TokenId fim_sep = kNoToken;
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename T>
using StringMap = std::unordered_map<std::string, T, StringHash, std::equal_to<>>;

struct Vocab {
  VocabType type = VocabType::kSpm;
  std::string model;  // tokenizer.ggml.model
  std::string pre;    // tokenizer.ggml.pre as stored ("" when absent)
  PreTokenizerKind pre_kind = PreTokenizerKind::kDefault;  // BPE only
  std::string general_name;

  std::vector<TokenData> tokens;
  StringMap<TokenId> token_to_id;
  StringMap<int32_t> merge_ranks;  // BPE: "left right" -> rank (line index in the merges array)

  SpecialTokenIds special;
  std::vector<TokenId> eog_ids;        // end-of-generation tokens, sorted, unique
  std::vector<TokenId> special_cache;  // control/user-defined/unknown ids, longest text first

  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;    // SPM: prepend " " to the text (and strip it when decoding)
  bool clean_spaces = false;        // decode: " ," -> ",", " 's" -> "'s", ... (llama.cpp)
  bool ignore_merges = false;       // BPE: a pre-token that is a whole token is not merged
  bool escape_whitespaces = false;  // " " <-> "▁" (SPM)

  [[nodiscard]] int32_t size() const { return static_cast<int32_t>(tokens.size()); }
  [[nodiscard]] bool valid(TokenId id) const { return id >= 0 && id < size(); }
  [[nodiscard]] bool has_attr(TokenId id, TokenAttr a) const {
    return (tokens[static_cast<size_t>(id)].attrs & bit(a)) != 0;
  }
  // The id of the token whose text is exactly `text`, or kNoToken.
  [[nodiscard]] TokenId find(std::string_view text) const {
    auto it = token_to_id.find(text);
    return it == token_to_id.end() ? kNoToken : it->second;
  }
};

// Reads and validates the tokenizer metadata of `file` (tensor data is not needed). Errors:
// NotFound for a missing tokenizer.ggml.model or tokens array, Corrupt for malformed metadata
// (mistyped keys, array lengths that disagree, duplicate tokens, malformed merges, special ids
// out of range), Unsupported for tokenizer models and pre-tokenizers keel does not implement.
Result<Vocab> load_vocab(const gguf::GgufFile& file);

// Applies llama.cpp's text-based fix-ups and builds eog_ids and special_cache. Called by
// load_vocab(); exposed for tests.
void finalize_special_tokens(Vocab* vocab);

}  // namespace keel::tokenizer
