// Special-token partitioning (see special_partition.h): a byte trie marks which special texts
// occur in the input, then llama.cpp's longest-first splitting runs for those tokens only.
// Fragments are byte ranges into the caller's text; nothing is copied.
// Thread safety: the matcher is immutable; partition() keeps its state on the stack.
#include "tokenizer/special_partition.h"

namespace keel::tokenizer {
namespace {

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

// Cuts every occurrence of `special` (text `stext`) out of the raw fragments of `in`, except
// occurrences overlapping `plain` (when given): those stay raw text.
void split_on(const std::vector<Fragment>& in, std::string_view text, TokenId special,
              std::string_view stext, uint32_t attrs, const TextSpans* plain,
              std::vector<Fragment>* out) {
  const bool lstrip = attrs & bit(TokenAttr::kLstrip);
  const bool rstrip = attrs & bit(TokenAttr::kRstrip);
  for (const Fragment& f : in) {
    if (f.token != kNoToken) {
      out->push_back(f);
      continue;
    }
    size_t base = f.offset;
    size_t len = f.length;
    size_t from = base;  // where the next search starts (past skipped occurrences)
    while (len > 0) {
      const size_t match = text.substr(0, base + len).find(stext, from);
      if (match == std::string_view::npos) {
        out->push_back({kNoToken, base, len});
        break;
      }
      if (plain != nullptr && overlaps(*plain, match, match + stext.size())) {
        from = match + 1;  // written by the user: text, not the token
        continue;
      }
      size_t left_len = match - base;
      if (lstrip) {
        while (left_len > 0 && is_ascii_space(text[base + left_len - 1])) --left_len;
      }
      if (left_len > 0) out->push_back({kNoToken, base, left_len});
      out->push_back({special, 0, 0});
      size_t right = match + stext.size();
      size_t right_len = base + len - right;
      if (rstrip) {
        while (right_len > 0 && is_ascii_space(text[right])) {
          ++right;
          --right_len;
        }
      }
      base = right;
      len = right_len;
      from = base;
    }
  }
}

}  // namespace

SpecialTokenMatcher::SpecialTokenMatcher(const Vocab& vocab) {
  nodes_.emplace_back();  // root
  num_specials_ = vocab.special_cache.size();
  for (size_t index = 0; index < num_specials_; ++index) {
    const std::string& text = vocab.tokens[static_cast<size_t>(vocab.special_cache[index])].text;
    int32_t node = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      const uint8_t b = static_cast<uint8_t>(text[i]);
      int32_t next = child(node, b);
      if (next == 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        if (node == 0) {
          root_[b] = next;
        } else {
          nodes_[static_cast<size_t>(node)].edges.emplace_back(b, next);
        }
      }
      node = next;
    }
    nodes_[static_cast<size_t>(node)].special = static_cast<int32_t>(index);
  }
}

int32_t SpecialTokenMatcher::child(int32_t node, uint8_t b) const {
  if (node == 0) return root_[b];
  for (const auto& [byte, next] : nodes_[static_cast<size_t>(node)].edges) {
    if (byte == b) return next;
  }
  return 0;
}

bool SpecialTokenMatcher::occurring(std::string_view text, std::vector<uint8_t>* present) const {
  present->assign(num_specials_, 0);
  bool any = false;
  if (nodes_.size() <= 1) return false;
  for (size_t start = 0; start < text.size(); ++start) {
    int32_t node = root_[static_cast<uint8_t>(text[start])];
    for (size_t i = start + 1; node != 0; ++i) {
      const int32_t special = nodes_[static_cast<size_t>(node)].special;
      if (special >= 0) {
        (*present)[static_cast<size_t>(special)] = 1;
        any = true;
      }
      if (i >= text.size()) break;
      node = child(node, static_cast<uint8_t>(text[i]));
    }
  }
  return any;
}

std::vector<Fragment> SpecialTokenMatcher::partition(const Vocab& vocab, std::string_view text,
                                                     bool parse_special,
                                                     const TextSpans& plain) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({kNoToken, 0, text.size()});
  std::vector<uint8_t> present;
  if (!occurring(text, &present)) return fragments;
  const uint32_t parse_only = bit(TokenAttr::kControl) | bit(TokenAttr::kUnknown);
  std::vector<Fragment> next;
  for (size_t i = 0; i < vocab.special_cache.size(); ++i) {  // longest text first
    if (!present[i]) continue;
    const TokenId id = vocab.special_cache[i];
    const TokenData& t = vocab.tokens[static_cast<size_t>(id)];
    const bool parse_only_token = (t.attrs & parse_only) != 0;
    if (!parse_special && parse_only_token) continue;
    next.clear();
    split_on(fragments, text, id, t.text, t.attrs,
             parse_only_token && !plain.empty() ? &plain : nullptr, &next);
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace keel::tokenizer
