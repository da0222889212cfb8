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

tokenizer::TrackedText strip_pic_marks(const tokenizer::TrackedText& text) {
  tokenizer::TrackedText out;
  std::string_view rest = text.text;
  size_t pos = 0;  // offset of `rest` in text.text
  while (!rest.empty()) {
    const size_t b = rest.find(kPicBegin), e = rest.find(kPicEnd);
    const size_t at = std::min(b, e);
    const size_t keep = at == std::string_view::npos ? rest.size() : at;
    tokenizer::append_spans(&out.plain, text.plain, pos, pos + keep, out.text.size());
    out.text += rest.substr(0, keep);
    if (at == std::string_view::npos) break;
    const size_t skip = at + (at == b ? kPicBegin.size() : kPicEnd.size());
    rest.remove_prefix(skip);
    pos += skip;
  }
  return out;
}

Result<PicTokens> tokenize_pic(const tokenizer::Tokenizer& tok,
                               const tokenizer::TrackedText& tracked) {
  PicTokens out;
  bool first = true;
  std::string_view rendered = tracked.text;
  auto append = [&](std::string_view text, bool chunk) {
    if (text.empty()) return;
    const size_t begin = static_cast<size_t>(text.data() - tracked.text.data());
    const tokenizer::TrackedText piece =
        tokenizer::tracked_substr(tracked, begin, begin + text.size());
    const std::vector<int32_t> t = tok.encode(piece, /*add_special=*/first || chunk,
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
