// SPM encoding with a priority queue of candidate merges (see spm_encoder.h).
//
// A queued merge goes stale when either side has changed since it was queued; that is detected
// by the sizes: symbols only grow, so the pair is still current exactly when both are alive and
// their lengths still add up to the queued size.
#include "tokenizer/spm_encoder.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace keel::tokenizer {
namespace {

struct Symbol {
  int32_t prev;
  int32_t next;
  size_t offset;
  size_t length;  // 0 once merged into its left neighbour
};

struct Bigram {
  int32_t left;
  int32_t right;
  float score;
  size_t size;
};

// Max-heap order: higher score first, then the leftmost pair.
bool lower_priority(const Bigram& a, const Bigram& b) {
  return a.score < b.score || (a.score == b.score && a.left > b.left);
}

class SpmSession {
 public:
  SpmSession(const Vocab& vocab, std::string_view text) : vocab_(vocab), text_(text) {}

  void run(const ByteTokens& byte_tokens, std::vector<TokenId>* out) {
    for (size_t offset = 0; offset < text_.size();) {
      const size_t len = std::min(utf8_sequence_length(static_cast<uint8_t>(text_[offset])),
                                  text_.size() - offset);
      const auto index = static_cast<int32_t>(symbols_.size());
      offset += len;
      symbols_.push_back({index - 1, offset == text_.size() ? -1 : index + 1, offset - len, len});
    }
    for (int32_t i = 1; i < static_cast<int32_t>(symbols_.size()); ++i) try_add(i - 1, i);
    while (!queue_.empty()) {
      std::pop_heap(queue_.begin(), queue_.end(), lower_priority);
      const Bigram b = queue_.back();
      queue_.pop_back();
      Symbol& left = symbols_[static_cast<size_t>(b.left)];
      Symbol& right = symbols_[static_cast<size_t>(b.right)];
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
      emit(symbols_[static_cast<size_t>(i)], byte_tokens, out);
    }
  }

 private:
  void try_add(int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols_[static_cast<size_t>(left)];
    const Symbol& r = symbols_[static_cast<size_t>(right)];
    const std::string_view pair = text_.substr(l.offset, l.length + r.length);
    const TokenId id = vocab_.find(pair);
    if (id == kNoToken) return;
    queue_.push_back({left, right, vocab_.tokens[static_cast<size_t>(id)].score, pair.size()});
    std::push_heap(queue_.begin(), queue_.end(), lower_priority);
  }

  void emit(const Symbol& s, const ByteTokens& byte_tokens, std::vector<TokenId>* out) const {
    const std::string_view piece = text_.substr(s.offset, s.length);
    if (const TokenId id = vocab_.find(piece); id != kNoToken) {
      out->push_back(id);
      return;
    }
    for (char c : piece) {
      const TokenId id = byte_tokens[static_cast<uint8_t>(c)];
      if (id != kNoToken) out->push_back(id);
    }
  }

  const Vocab& vocab_;
  std::string_view text_;
  std::vector<Symbol> symbols_;
  std::vector<Bigram> queue_;
};

}  // namespace

void spm_encode(const Vocab& vocab, const ByteTokens& byte_tokens, std::string_view text,
                std::vector<TokenId>* out) {
  SpmSession session(vocab, text);
  session.run(byte_tokens, out);
}

}  // namespace keel::tokenizer
