// IncrementalDecoder: pieces -> (first-space strip) -> clean_spaces stream -> UTF-8 repair. The
// same stages as Tokenizer::decode, in streaming form, so the outputs agree byte for byte (see
// incremental_decoder.h).
// Thread safety: one owner.
#include "tokenizer/incremental_decoder.h"

namespace keel::tokenizer {

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool render_special,
                                       DecodePosition position)
    : tokenizer_(tokenizer),
      render_special_(render_special),
      strip_first_(position == DecodePosition::kSequenceStart && tokenizer.add_space_prefix()) {}

std::string IncrementalDecoder::push(TokenId id) {
  std::string_view piece = tokenizer_.piece_view(id, render_special_);
  if (first_ && strip_first_ && !piece.empty() && piece.front() == ' ') {
    piece.remove_prefix(1);
  }
  first_ = false;
  std::string out;
  if (tokenizer_.clean_spaces()) {
    std::string cleaned;
    cleaner_.push(piece, &cleaned);
    utf8_.push(cleaned, &out);
  } else {
    utf8_.push(piece, &out);
  }
  return out;
}

std::string IncrementalDecoder::finish() {
  std::string out;
  if (tokenizer_.clean_spaces()) {
    std::string cleaned;
    cleaner_.finish(&cleaned);
    utf8_.push(cleaned, &out);
  }
  utf8_.finish(&out);
  first_ = true;
  return out;
}

}  // namespace keel::tokenizer
