// llama.cpp's clean_spaces decoding step for BPE vocabularies, in a batch and a streaming form.
// Three passes over the decoded bytes:
//   1. drop a space before '?', '!', '.' or ','            ("a ," -> "a,")
//   2. "x ' y" -> "x'y": drop the spaces around a lone apostrophe; the space after it is consumed
//      and cannot start another match
//   3. drop the space before "'s", "'m", "'re", "'ve"       (" 't", " 'd", " 'll" are kept)
// StreamingSpaceCleaner produces exactly clean_spaces_batch() of the concatenated input, whatever
// the chunking: each pass holds back at most the few bytes whose fate depends on bytes not seen
// yet.
//
// Thread safety: clean_spaces_batch() is pure; a StreamingSpaceCleaner has one owner.
#pragma once

#include <string>
#include <string_view>

namespace keel::tokenizer {

// The three passes applied to the whole text (a direct transcription of llama.cpp).
std::string clean_spaces_batch(std::string_view text);

class StreamingSpaceCleaner {
 public:
  // Appends to `out` the cleaned bytes that `bytes` makes final.
  void push(std::string_view bytes, std::string* out);
  // Flushes what is held back and resets to the initial state.
  void finish(std::string* out);

 private:
  // Each stage consumes characters and passes its output to the next one.
  void pass1(char c, std::string* out);
  void pass2(char c, std::string* out);
  void pass3(char c, std::string* out);
  void flush1(std::string* out);
  void flush2(std::string* out);
  void flush3(std::string* out);

  bool p1_space_ = false;  // pass 1 holds a space
  std::string p2_hold_;    // pass 2 holds "", " " or " '"
  std::string p3_hold_;    // pass 3 holds "", " ", " '", " 'r" or " 'v"
};

}  // namespace keel::tokenizer
