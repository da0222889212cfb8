// PreTokenizer: splits text into pre-tokens with a sequence of PCRE2 regexes (UTF + UCP, JIT when
// the library has it). Each regex splits every piece left by the previous one into its matches
// and the unmatched runs between them; all pieces are kept, in order, so concatenating them gives
// the input back. A regex sees one piece at a time: lookaheads and `$` stop at the piece's end.
//
// Thread safety: immutable after create(); split() may run concurrently from many threads (match
// data is per call). Copies share the compiled patterns.
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "tokenizer/pre_tokenizer_spec.h"

namespace keel::tokenizer {

class PreTokenizer {
 public:
  // Compiles the regex sequence of `kind`.
  static Result<PreTokenizer> create(PreTokenizerKind kind);
  // Compiles an explicit regex sequence (PCRE2 syntax). InvalidArgument names a bad pattern.
  static Result<PreTokenizer> create(std::span<const std::string_view> regexes);

  // Appends the pieces of `text` to `pieces` (views into `text`). `text` must be valid UTF-8
  // (see normalize_utf8_lenient); an empty text gives no pieces.
  void split(std::string_view text, std::vector<std::string_view>* pieces) const;

  // Convenience form of split() for tests and tools.
  [[nodiscard]] std::vector<std::string_view> split(std::string_view text) const;

  // Whether the patterns run through PCRE2's JIT compiler.
  [[nodiscard]] bool uses_jit() const { return uses_jit_; }

 private:
  struct Regex;
  std::vector<std::shared_ptr<const Regex>> regexes_;
  bool uses_jit_ = false;
};

}  // namespace keel::tokenizer
