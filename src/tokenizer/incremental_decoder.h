// IncrementalDecoder: streaming detokenization for one generated sequence. push(id) returns the
// text that token makes final; finish() returns the rest.
//
// DecodePosition says where the ids stand. kSequenceStart: they begin a text, so the first piece
// loses one SentencePiece space (add_space_prefix vocabularies), as Tokenizer::decode does.
// kContinuation: they continue a prompt — generated text — and keep every space, so that prompt +
// completion reads as one text ("Tim" + " went"), as llama.cpp and vLLM return it.
//
// Invariants:
//   - push()/finish() output is always valid UTF-8 and never splits a code point: the bytes of an
//     unfinished character (e.g. the first byte-fallback token of "é") are held until it
//     completes; an ill-formed sequence becomes U+FFFD as soon as it is known to be ill-formed,
//     and an unfinished one left at finish() becomes one U+FFFD.
//   - for any ids, the concatenation of push(ids[0]) ... push(ids[n-1]) and finish() equals
//     Tokenizer::decode(ids, render_special) byte for byte under kSequenceStart (space stripping
//     of the first token and clean_spaces included; clean_spaces holds back a trailing " " or
//     " '" until the next bytes decide it); under kContinuation it equals the same without the
//     first-token strip.
// After finish() the decoder is back in its initial state and can decode another sequence.
//
// Thread safety: one owner. The decoder keeps its Tokenizer's vocabulary alive.
#pragma once

#include <string>

#include "tokenizer/space_cleaner.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace keel::tokenizer {

enum class DecodePosition { kSequenceStart, kContinuation };

class IncrementalDecoder {
 public:
  IncrementalDecoder(const Tokenizer& tokenizer, bool render_special,
                     DecodePosition position = DecodePosition::kSequenceStart);

  // The complete UTF-8 text now available after token `id`.
  std::string push(TokenId id);
  // Whatever is left; resets the decoder.
  std::string finish();

 private:
  Tokenizer tokenizer_;  // a cheap shared handle
  bool render_special_;
  bool strip_first_;  // kSequenceStart on an add_space_prefix vocabulary
  bool first_ = true;
  StreamingSpaceCleaner cleaner_;
  Utf8Sanitizer utf8_;
};

}  // namespace keel::tokenizer
