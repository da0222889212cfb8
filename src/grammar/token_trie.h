// TokenTrie: the vocabulary as the grammar sees it — every token's exact output bytes
// (SentencePiece "▁" as a space, byte-fallback "<0xNN>" tokens as their byte, GPT-2 byte-level
// characters mapped back to bytes: Tokenizer::token_to_piece) in a byte trie stored in preorder, so
// a mask walks it once, skipping whole subtrees the grammar rejects. Control, unknown and unused
// tokens, and tokens with no bytes, are never in the trie: a constraint never allows them, except
// the end-of-generation ids (eog()), which it allows exactly when the grammar is complete.
// Invariants: nodes are in preorder; node i's subtree is [i, nodes[i].next); depth 1 = first byte.
// Thread safety: immutable after construction; share freely (one per vocabulary).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace keel::grammar {

struct TrieNode {
  uint8_t byte = 0;        // the byte on the edge into this node
  uint16_t depth = 0;      // bytes from the root (1 for a first byte)
  uint32_t next = 0;       // index just past this node's subtree
  uint32_t tok_begin = 0;  // tokens whose bytes end here: tokens_[tok_begin, +tok_count)
  uint32_t tok_count = 0;
};

class TokenTrie {
 public:
  // From a tokenizer's vocabulary (see the file comment for which tokens are included).
  static TokenTrie from_tokenizer(const tokenizer::Tokenizer& tok);
  // From explicit pieces (index = token id; "" = never allowed) and end-of-generation ids.
  static TokenTrie from_pieces(std::vector<std::string> pieces, std::vector<int32_t> eog);

  [[nodiscard]] const std::vector<TrieNode>& nodes() const { return nodes_; }
  [[nodiscard]] std::span<const int32_t> tokens_at(const TrieNode& n) const {
    return {tokens_.data() + n.tok_begin, n.tok_count};
  }
  // The bytes of token `id` ("" for tokens outside the trie).
  [[nodiscard]] const std::string& piece(int32_t id) const {
    return pieces_[static_cast<size_t>(id)];
  }
  [[nodiscard]] int32_t vocab_size() const { return static_cast<int32_t>(pieces_.size()); }
  [[nodiscard]] std::span<const int32_t> eog() const { return eog_; }
  [[nodiscard]] size_t max_depth() const { return max_depth_; }

 private:
  std::vector<std::string> pieces_;
  std::vector<int32_t> eog_;
  std::vector<TrieNode> nodes_;
  std::vector<int32_t> tokens_;
  size_t max_depth_ = 0;
};

}  // namespace keel::grammar
