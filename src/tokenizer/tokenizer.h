// Tokenizer: text <-> token ids for a GGUF vocabulary, matching llama.cpp (llama_tokenize,
// llama_token_to_piece, llama_detokenize). Supports SPM ("llama") and byte-level BPE ("gpt2")
// vocabularies; other tokenizer models are refused at load with an Unsupported status.
//
// encode(text, add_special, parse_special):
//   1. special-token partitioning (special_partition.h): with parse_special, control tokens
//      written literally in the text ("<s>", "<|im_end|>") become those tokens; user-defined
//      tokens always do;
//   2. each raw fragment is encoded (SPM: " " prefix after BOS/specials when add_space_prefix,
//      spaces as U+2581; BPE: regex pre-tokenizer + merges);
//   3. with add_special, BOS (EOS) is added when add_bos() (add_eos()).
// decode(ids, render_special) is llama_detokenize(remove_special = false): the pieces are
// concatenated, the first piece loses one leading space when add_space_prefix (SPM), and
// clean_spaces vocabularies get llama.cpp's space cleanup. Keel then repairs invalid UTF-8: each
// maximal ill-formed subsequence (e.g. an unfinished byte-fallback character) becomes U+FFFD, so
// decode() and IncrementalDecoder always return valid UTF-8 and always agree. llama.cpp returns
// such bytes raw; on valid output the two are identical.
//
// Thread safety: a Tokenizer is immutable; encode/decode/token_to_piece may run concurrently from
// any number of threads. Copies are cheap and share the same vocabulary.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "gguf/reader.h"
#include "tokenizer/text_span.h"
#include "tokenizer/vocab.h"

namespace keel::tokenizer {

class Tokenizer {
 public:
  // Builds a tokenizer from the file's metadata (tensor data is not used; open vocab-only files
  // with DataMode::kNone). Errors as load_vocab().
  static Result<Tokenizer> from_gguf(const gguf::GgufFile& file);
  // Builds a tokenizer from an already loaded vocabulary; InvalidArgument when `vocab` breaks
  // the invariants load_vocab() guarantees (see vocab.h).
  static Result<Tokenizer> from_vocab(Vocab vocab);

  // Text -> ids. Never fails: any byte string is encodable (invalid UTF-8 as llama.cpp does).
  [[nodiscard]] std::vector<TokenId> encode(std::string_view text, bool add_special,
                                            bool parse_special) const;
  // The same, except that control tokens are not parsed inside `plain` (text_span.h): a rendered
  // chat prompt, whose markup yields special tokens and whose message contents never do. For
  // text without control-token strings inside `plain` the ids equal encode()'s.
  [[nodiscard]] std::vector<TokenId> encode(const TrackedText& text, bool add_special,
                                            bool parse_special) const;

  // A lower bound on encode(text, false, *).size() from the byte length alone, O(1) (O(n) for
  // vocabularies with lstrip/rstrip special tokens): every token covers at most
  // max_token_bytes() input bytes (see tokenizer.cpp). 0 when the vocabulary allows no bound.
  [[nodiscard]] size_t min_tokens(std::string_view text) const;
  // The most input bytes one token can cover; 0 when unbounded (see min_tokens).
  [[nodiscard]] size_t max_token_bytes() const;

  // The bytes token `id` stands for (llama_token_to_piece with lstrip 0). Control and unknown
  // tokens give "" unless render_special. A byte token gives its single byte, which may be part
  // of a multi-byte character. An id outside the vocabulary gives "".
  [[nodiscard]] std::string token_to_piece(TokenId id, bool render_special) const;

  // Ids -> text (see the file comment). Ids outside the vocabulary render as "".
  [[nodiscard]] std::string decode(std::span<const TokenId> ids, bool render_special) const;

  [[nodiscard]] int32_t vocab_size() const;
  [[nodiscard]] VocabType type() const;
  [[nodiscard]] TokenId bos_id() const;  // -1 if none
  [[nodiscard]] TokenId eos_id() const;
  [[nodiscard]] TokenId eot_id() const;
  [[nodiscard]] TokenId eom_id() const;
  [[nodiscard]] TokenId unk_id() const;
  [[nodiscard]] TokenId pad_id() const;
  [[nodiscard]] const SpecialTokenIds& special_ids() const;
  // End of generation: eos, eot, eom, and the tokens llama.cpp recognises by text.
  [[nodiscard]] bool is_eog(TokenId id) const;
  [[nodiscard]] std::span<const TokenId> eog_ids() const;
  [[nodiscard]] bool is_control(TokenId id) const;  // false for ids out of range
  [[nodiscard]] bool add_bos() const;
  [[nodiscard]] bool add_eos() const;
  [[nodiscard]] bool add_space_prefix() const;
  [[nodiscard]] bool clean_spaces() const;
  [[nodiscard]] std::string_view model_name() const;  // tokenizer.ggml.model
  [[nodiscard]] std::string_view pre_name() const;    // tokenizer.ggml.pre ("" when absent)
  // The vocabulary text of `id` ("" when out of range) and the id of a text (-1 if none).
  [[nodiscard]] std::string_view token_text(TokenId id) const;
  [[nodiscard]] TokenId find_token(std::string_view text) const;
  [[nodiscard]] const Vocab& vocab() const;

 private:
  friend class IncrementalDecoder;
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  [[nodiscard]] std::vector<TokenId> encode_spans(std::string_view text, bool add_special,
                                                  bool parse_special, const TextSpans& plain) const;
  // token_to_piece without the copy; empty view for hidden tokens.
  [[nodiscard]] std::string_view piece_view(TokenId id, bool render_special) const;

  std::shared_ptr<const Impl> impl_;
};

}  // namespace keel::tokenizer
