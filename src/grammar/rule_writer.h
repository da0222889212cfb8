// RuleWriter: collects GBNF rules written by the JSON Schema compiler and its keyword families
// (numbers, strings, objects, ...), handing out fresh rule names under one prefix so that rules of
// several schemas in one grammar never clash.
// Thread safety: one compilation, one thread.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace keel::grammar {

class RuleWriter {
 public:
  explicit RuleWriter(std::string prefix) : prefix_(std::move(prefix)) {}

  // A new rule name, `<prefix>s<n>-<hint>` (hint: letters, digits, '-').
  std::string fresh(std::string_view hint) {
    return fmt::format("{}s{}-{}", prefix_, next_++, hint);
  }
  // Appends `name ::= body`.
  void define(std::string_view name, std::string_view body) {
    text_ += fmt::format("{} ::= {}\n", name, body);
  }
  // A fresh rule `hint` defined as `body`; returns its name.
  std::string add(std::string_view hint, std::string_view body) {
    std::string name = fresh(hint);
    define(name, body);
    return name;
  }
  [[nodiscard]] const std::string& text() const { return text_; }
  [[nodiscard]] size_t size() const { return text_.size(); }

 private:
  std::string prefix_;
  std::string text_;
  int next_ = 0;
};

}  // namespace keel::grammar
