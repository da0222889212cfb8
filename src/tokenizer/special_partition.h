// Special-token partitioning: the first step of encoding. Text is cut into raw-text fragments and
// special-token fragments exactly as llama.cpp's tokenizer_st_partition does: special tokens are
// taken longest text first (ties by id); each one claims every occurrence, left to right, inside
// the raw fragments left by the longer ones. Control and unknown tokens take part only when
// parse_special is true; user-defined tokens always do (as in Hugging Face tokenizers). A token
// with the lstrip (rstrip) attribute also swallows the ASCII whitespace before (after) it.
// Inside `plain` spans (text a user wrote, see text_span.h) control and unknown tokens are not
// recognised, as if parse_special were false there; an occurrence overlapping a span stays text.
//
// A byte trie over the special texts first finds which of them occur at all, so text without
// special tokens costs one pass, however many special tokens the vocabulary has.
// Thread safety: immutable after construction; partition() is const and reentrant.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>
#include <vector>

#include "tokenizer/text_span.h"
#include "tokenizer/vocab.h"

namespace keel::tokenizer {

struct Fragment {
  TokenId token = kNoToken;  // the special token, or kNoToken for raw text
  size_t offset = 0;         // raw text: byte range in the partitioned text
  size_t length = 0;         // (never 0 for raw text)
};

class SpecialTokenMatcher {
 public:
  SpecialTokenMatcher() = default;
  // `vocab` must outlive the matcher's use in partition() (it is passed again there).
  explicit SpecialTokenMatcher(const Vocab& vocab);

  [[nodiscard]] std::vector<Fragment> partition(const Vocab& vocab, std::string_view text,
                                                bool parse_special,
                                                const TextSpans& plain = {}) const;

 private:
  struct Node {
    int32_t special = -1;  // index into Vocab::special_cache of the token whose text ends here
    std::vector<std::pair<uint8_t, int32_t>> edges;  // byte -> child node index
  };
  // Sets (*present)[i] when special_cache[i] occurs somewhere in `text`; false when none does.
  bool occurring(std::string_view text, std::vector<uint8_t>* present) const;
  [[nodiscard]] int32_t child(int32_t node, uint8_t b) const;

  std::array<int32_t, 256> root_{};  // root edges (0 = none; node 0 is the root)
  std::vector<Node> nodes_;
  size_t num_specials_ = 0;
};

}  // namespace keel::tokenizer
