// TokenTrie construction (token_trie.h): sort the pieces, then emit preorder nodes from the
// longest common prefix of neighbours.
#include "grammar/token_trie.h"

#include <algorithm>
#include <numeric>

#include "core/check.h"

namespace keel::grammar {

TokenTrie TokenTrie::from_tokenizer(const tokenizer::Tokenizer& tok) {
  const tokenizer::Vocab& v = tok.vocab();
  std::vector<std::string> pieces(static_cast<size_t>(tok.vocab_size()));
  using tokenizer::TokenAttr;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (v.has_attr(id, TokenAttr::kControl) || v.has_attr(id, TokenAttr::kUnknown) ||
        v.has_attr(id, TokenAttr::kUnused) || tok.is_eog(id)) {
      continue;
    }
    pieces[static_cast<size_t>(id)] = tok.token_to_piece(id, false);
  }
  std::vector<int32_t> eog(tok.eog_ids().begin(), tok.eog_ids().end());
  return from_pieces(std::move(pieces), std::move(eog));
}

TokenTrie TokenTrie::from_pieces(std::vector<std::string> pieces, std::vector<int32_t> eog) {
  TokenTrie t;
  t.pieces_ = std::move(pieces);
  t.eog_ = std::move(eog);
  for (int32_t id : t.eog_) {
    KEEL_CHECK(id >= 0 && id < t.vocab_size());
    t.pieces_[static_cast<size_t>(id)].clear();
  }
  std::vector<int32_t> order;
  for (int32_t id = 0; id < t.vocab_size(); ++id) {
    if (!t.pieces_[static_cast<size_t>(id)].empty()) order.push_back(id);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&t](int32_t a, int32_t b) { return t.piece(a) < t.piece(b); });
  std::vector<uint32_t> path;  // node index per depth - 1 of the previous piece
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& p = t.piece(id);
    size_t lcp = 0;
    if (prev != nullptr) {
      while (lcp < p.size() && lcp < prev->size() && p[lcp] == (*prev)[lcp]) ++lcp;
    }
    // Close the previous piece's nodes below the common prefix.
    while (path.size() > lcp) {
      t.nodes_[path.back()].next = static_cast<uint32_t>(t.nodes_.size());
      path.pop_back();
    }
    for (size_t d = lcp; d < p.size(); ++d) {
      TrieNode n;
      n.byte = static_cast<uint8_t>(p[d]);
      n.depth = static_cast<uint16_t>(d + 1);
      n.tok_begin = static_cast<uint32_t>(t.tokens_.size());
      path.push_back(static_cast<uint32_t>(t.nodes_.size()));
      t.nodes_.push_back(n);
    }
    TrieNode& last = t.nodes_[path.back()];
    if (last.tok_count == 0) last.tok_begin = static_cast<uint32_t>(t.tokens_.size());
    KEEL_CHECK(last.tok_begin + last.tok_count == t.tokens_.size());
    t.tokens_.push_back(id);
    ++last.tok_count;
    t.max_depth_ = std::max(t.max_depth_, p.size());
    prev = &p;
  }
  while (!path.empty()) {
    t.nodes_[path.back()].next = static_cast<uint32_t>(t.nodes_.size());
    path.pop_back();
  }
  return t;
}

}  // namespace keel::grammar
