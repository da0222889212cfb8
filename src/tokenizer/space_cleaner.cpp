// clean_spaces: the batch form transcribes llama.cpp's three in-place passes; the streaming form
// runs the same passes as a pipeline of three small state machines, each holding back only the
// bytes whose fate depends on input not seen yet (see space_cleaner.h).
// Thread safety: batch is pure; a StreamingSpaceCleaner has one owner.
#include "tokenizer/space_cleaner.h"

namespace keel::tokenizer {
namespace {

bool is_pass1_punct(char c) { return c == '?' || c == '!' || c == '.' || c == ','; }

}  // namespace

std::string clean_spaces_batch(std::string_view text) {
  // Pass 1.
  std::string a;
  a.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (i > 0 && text[i - 1] == ' ' && is_pass1_punct(text[i])) a.pop_back();
    a.push_back(text[i]);
  }
  // Pass 2. A consumed space is overwritten with '\0' so it cannot precede another match.
  std::string b;
  b.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const char x = a[i];
    if (i > 0 && x == '\'' && i + 1 < a.size() && a[i - 1] == ' ' && a[i + 1] == ' ') {
      b.pop_back();
      a[++i] = '\0';
    }
    b.push_back(x);
  }
  // Pass 3.
  std::string c;
  c.reserve(b.size());
  const size_t n = b.size();
  for (size_t i = 0; i < n; ++i) {
    const char x = b[i];
    if (i > 0 && b[i - 1] == ' ' && x == '\'' && i + 1 < n) {
      const char x1 = b[i + 1];
      if (x1 == 's' || x1 == 'm') {
        c.pop_back();
      } else if (x1 != 't' && x1 != 'd' && i + 2 < n) {
        const char x2 = b[i + 2];
        if ((x1 == 'r' || x1 == 'v') && x2 == 'e') c.pop_back();
      }
    }
    c.push_back(x);
  }
  return c;
}

void StreamingSpaceCleaner::pass1(char c, std::string* out) {
  if (p1_space_) {
    p1_space_ = false;
    if (!is_pass1_punct(c)) pass2(' ', out);
  }
  if (c == ' ') {
    p1_space_ = true;
  } else {
    pass2(c, out);
  }
}

void StreamingSpaceCleaner::pass2(char c, std::string* out) {
  if (p2_hold_.empty()) {
    if (c == ' ') {
      p2_hold_ = " ";
    } else {
      pass3(c, out);
    }
  } else if (p2_hold_ == " ") {
    if (c == '\'') {
      p2_hold_ = " '";
    } else if (c == ' ') {
      pass3(' ', out);
    } else {
      p2_hold_.clear();
      pass3(' ', out);
      pass3(c, out);
    }
  } else {  // " '"
    p2_hold_.clear();
    if (c == ' ') {
      pass3('\'', out);  // both spaces dropped; the second one is consumed
    } else {
      pass3(' ', out);
      pass3('\'', out);
      pass3(c, out);
    }
  }
}

void StreamingSpaceCleaner::pass3(char c, std::string* out) {
  if (p3_hold_.empty()) {
    if (c == ' ') {
      p3_hold_ = " ";
    } else {
      out->push_back(c);
    }
    return;
  }
  if (p3_hold_ == " ") {
    if (c == '\'') {
      p3_hold_ = " '";
    } else if (c == ' ') {
      out->push_back(' ');
    } else {
      p3_hold_.clear();
      out->push_back(' ');
      out->push_back(c);
    }
    return;
  }
  if (p3_hold_ == " '") {
    if (c == 's' || c == 'm') {
      p3_hold_.clear();
      out->push_back('\'');
      out->push_back(c);
    } else if (c == 'r' || c == 'v') {
      p3_hold_.push_back(c);
    } else {
      p3_hold_.clear();
      out->append(" '");
      pass3(c, out);  // `c` follows a quote, not a space
    }
    return;
  }
  // " 'r" or " 'v"
  const char x1 = p3_hold_[2];
  p3_hold_.clear();
  if (c == 'e') {
    out->push_back('\'');
    out->push_back(x1);
    out->push_back('e');
  } else {
    out->append(" '");
    out->push_back(x1);
    pass3(c, out);
  }
}

void StreamingSpaceCleaner::flush1(std::string* out) {
  if (p1_space_) pass2(' ', out);
  p1_space_ = false;
}

void StreamingSpaceCleaner::flush2(std::string* out) {
  const std::string held = std::move(p2_hold_);
  p2_hold_.clear();
  for (char c : held) pass3(c, out);
}

void StreamingSpaceCleaner::flush3(std::string* out) {
  out->append(p3_hold_);
  p3_hold_.clear();
}

void StreamingSpaceCleaner::push(std::string_view bytes, std::string* out) {
  for (char c : bytes) pass1(c, out);
}

void StreamingSpaceCleaner::finish(std::string* out) {
  flush1(out);
  flush2(out);
  flush3(out);
}

}  // namespace keel::tokenizer
