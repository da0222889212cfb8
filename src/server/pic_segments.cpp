// Marking and tokenizing position-independent chunks (see pic_segments.h).
#include "server/pic_segments.h"

namespace keel::server {

std::string mark_pic(std::string_view text) {
  std::string out;
  out.reserve(text.size() + kPicBegin.size() + kPicEnd.size());
  out += kPicBegin;
  out += text;
  out += kPicEnd;
  return out;
}

bool has_pic_marks(std::string_view text) {
  return text.find(kPicBegin) != std::string_view::npos ||
         text.find(kPicEnd) != std::string_view::npos;
}

std::string strip_pic_marks(std::string_view text) {
  std::string out;
  while (!text.empty()) {
    const size_t b = text.find(kPicBegin), e = text.find(kPicEnd);
    const size_t at = std::min(b, e);
    out += text.substr(0, at);
    if (at == std::string_view::npos) break;
    text.remove_prefix(at + (at == b ? kPicBegin.size() : kPicEnd.size()));
  }
  return out;
}

Result<PicTokens> tokenize_pic(const tokenizer::Tokenizer& tok, std::string_view rendered) {
  PicTokens out;
  bool first = true;
  auto append = [&](std::string_view text, bool chunk) {
    if (text.empty()) return;
    const std::vector<int32_t> t = tok.encode(text, /*add_special=*/first || chunk,
                                              /*parse_special=*/true);
    first = false;
    if (t.empty()) return;
    if (chunk) {
      out.chunks.push_back(
          {static_cast<int32_t>(out.tokens.size()), static_cast<int32_t>(t.size())});
    }
    out.tokens.insert(out.tokens.end(), t.begin(), t.end());
  };
  while (!rendered.empty()) {
    const size_t b = rendered.find(kPicBegin);
    const size_t stray = rendered.find(kPicEnd);
    if (stray < b) return Status::invalid_argument("a position-independent marker is unbalanced");
    append(rendered.substr(0, b), false);
    if (b == std::string_view::npos) break;
    rendered.remove_prefix(b + kPicBegin.size());
    const size_t e = rendered.find(kPicEnd);
    if (e == std::string_view::npos || rendered.substr(0, e).find(kPicBegin) != std::string::npos) {
      return Status::invalid_argument("a position-independent marker is unbalanced");
    }
    append(rendered.substr(0, e), true);
    rendered.remove_prefix(e + kPicEnd.size());
  }
  return out;
}

}  // namespace keel::server
