// Byte-level BPE merging (see bpe_encoder.h). Stale queue entries are detected by size, as in the
// SPM encoder: symbols only grow, so a pair is current iff both sides are alive and their lengths
// still add up to the queued size.
#include "tokenizer/bpe_encoder.h"

#include <algorithm>
#include <string>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace keel::tokenizer {
namespace {

struct BpeSymbol {
  int32_t prev;
  int32_t next;
  size_t offset;
  size_t length;  // 0 once merged into its left neighbour
};

struct BpeBigram {
  int32_t left;
  int32_t right;
  int32_t rank;
  size_t size;
};

// Max-heap order: the lowest rank first, then the leftmost pair.
bool bpe_lower_priority(const BpeBigram& a, const BpeBigram& b) {
  return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
}

// Reusable buffers for the words of one encode call.
class BpeSession {
 public:
  explicit BpeSession(const Vocab& vocab) : vocab_(vocab) {}

  void encode_word(std::string_view word, std::vector<TokenId>* out) {
    if (vocab_.ignore_merges) {
      if (const TokenId id = vocab_.find(word); id != kNoToken) {
        out->push_back(id);
        return;
      }
    }
    word_ = word;
    symbols_.clear();
    queue_.clear();
    for (size_t offset = 0; offset < word.size();) {
      const size_t len =
          std::min(utf8_sequence_length(static_cast<uint8_t>(word[offset])), word.size() - offset);
      const auto index = static_cast<int32_t>(symbols_.size());
      offset += len;
      symbols_.push_back({index - 1, offset == word.size() ? -1 : index + 1, offset - len, len});
    }
    for (int32_t i = 1; i < static_cast<int32_t>(symbols_.size()); ++i) try_add(i - 1, i);
    while (!queue_.empty()) {
      std::pop_heap(queue_.begin(), queue_.end(), bpe_lower_priority);
      const BpeBigram b = queue_.back();
      queue_.pop_back();
      BpeSymbol& left = symbols_[static_cast<size_t>(b.left)];
      BpeSymbol& right = symbols_[static_cast<size_t>(b.right)];
      if (left.length == 0 || right.length == 0 || left.length + right.length != b.size) continue;
      left.length += right.length;
      right.length = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[static_cast<size_t>(right.next)].prev = b.left;
      try_add(left.prev, b.left);
      try_add(b.left, left.next);
    }
    for (int32_t i = symbols_.empty() ? -1 : 0; i != -1;
         i = symbols_[static_cast<size_t>(i)].next) {
      emit(symbols_[static_cast<size_t>(i)], out);
    }
  }

 private:
  std::string_view text_of(int32_t i) const {
    const BpeSymbol& s = symbols_[static_cast<size_t>(i)];
    return word_.substr(s.offset, s.length);
  }

  void try_add(int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    key_.assign(text_of(left));
    key_.push_back(' ');
    key_.append(text_of(right));
    const auto it = vocab_.merge_ranks.find(std::string_view(key_));
    if (it == vocab_.merge_ranks.end()) return;
    queue_.push_back({left, right, it->second, key_.size() - 1});
    std::push_heap(queue_.begin(), queue_.end(), bpe_lower_priority);
  }

  void emit(const BpeSymbol& s, std::vector<TokenId>* out) const {
    const std::string_view piece = word_.substr(s.offset, s.length);
    if (const TokenId id = vocab_.find(piece); id != kNoToken) {
      out->push_back(id);
      return;
    }
    for (size_t k = 0; k < piece.size(); ++k) {
      if (const TokenId id = vocab_.find(piece.substr(k, 1)); id != kNoToken) out->push_back(id);
    }
  }

  const Vocab& vocab_;
  std::string_view word_;
  std::string key_;
  std::vector<BpeSymbol> symbols_;
  std::vector<BpeBigram> queue_;
};

}  // namespace

void bpe_encode(const Vocab& vocab, const PreTokenizer& pre_tokenizer, std::string_view text,
                std::vector<TokenId>* out) {
  const std::string normalized = normalize_utf8_lenient(text);
  std::vector<std::string_view> pieces;
  pre_tokenizer.split(normalized, &pieces);
  BpeSession session(vocab);
  std::string word;
  for (std::string_view piece : pieces) {
    word.clear();
    byte_level_encode(piece, &word);
    session.encode_word(word, out);
  }
}

}  // namespace keel::tokenizer
