// TokenStream: a cursor over the lexer's tokens shared by the statement and expression parsers,
// with the helpers both need (look-ahead, expect, errors with line and column) and the nesting
// bound that keeps the recursive-descent parsers' stack use fixed.
//
// Thread safety: one owner (a single parse).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "jinja/lexer.h"

namespace keel::jinja {

class TokenStream {
 public:
  TokenStream(std::vector<Token> tokens, int max_nesting)
      : tokens_(std::move(tokens)), max_nesting_(max_nesting) {}

  // The token `ahead` places past the current one (the kEnd token past the end).
  [[nodiscard]] const Token& peek(size_t ahead = 0) const {
    size_t i = pos_ + ahead;
    return i < tokens_.size() ? tokens_[i] : tokens_.back();
  }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  [[nodiscard]] bool at_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kOperator && peek(ahead).text == op;
  }
  [[nodiscard]] bool at_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kName && peek(ahead).text == name;
  }
  bool skip_op(std::string_view op) {
    if (!at_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!at_name(name)) return false;
    next();
    return true;
  }

  // "line L, column C: msg" at the current token (or at `t`).
  [[nodiscard]] Status error(const std::string& msg) const { return error_at(peek(), msg); }
  [[nodiscard]] static Status error_at(const Token& t, const std::string& msg) {
    return Status::invalid_argument("line " + std::to_string(t.line) + ", column " +
                                    std::to_string(t.column) + ": " + msg);
  }
  // A short description of the current token for messages ("name 'foo'", "'%}'", ...).
  [[nodiscard]] std::string describe() const {
    const Token& t = peek();
    switch (t.kind) {
      case TokenKind::kText:
        return "template text";
      case TokenKind::kVarBegin:
        return "'{{'";
      case TokenKind::kVarEnd:
        return "'}}'";
      case TokenKind::kBlockBegin:
        return "'{%'";
      case TokenKind::kBlockEnd:
        return "'%}'";
      case TokenKind::kName:
        return "'" + t.text + "'";
      case TokenKind::kString:
        return "string literal";
      case TokenKind::kInt:
      case TokenKind::kFloat:
        return "number " + t.text;
      case TokenKind::kOperator:
        return "'" + t.text + "'";
      case TokenKind::kEnd:
        return "end of template";
    }
    return "token";
  }
  Status expect_op(std::string_view op) {
    if (skip_op(op)) return Status();
    return error("expected '" + std::string(op) + "', found " + describe());
  }
  Result<std::string> expect_name() {
    if (peek().kind != TokenKind::kName) return error("expected a name, found " + describe());
    return next().text;
  }
  Status expect(TokenKind kind, std::string_view what) {
    if (peek().kind == kind) {
      next();
      return Status();
    }
    return error("expected " + std::string(what) + ", found " + describe());
  }

  // Nesting guard: enter() fails past max_nesting; every enter() is paired with leave().
  Status enter() {
    if (++depth_ > max_nesting_) {
      return error("template nests deeper than " + std::to_string(max_nesting_) + " levels");
    }
    return Status();
  }
  void leave() { --depth_; }

 private:
  std::vector<Token> tokens_;  // never empty: ends with kEnd
  size_t pos_ = 0;
  int depth_ = 0;
  int max_nesting_;
};

// RAII pairing of TokenStream::enter/leave.
class NestingGuard {
 public:
  explicit NestingGuard(TokenStream* ts) : ts_(ts), status_(ts->enter()) {}
  ~NestingGuard() { ts_->leave(); }
  NestingGuard(const NestingGuard&) = delete;
  NestingGuard& operator=(const NestingGuard&) = delete;
  [[nodiscard]] const Status& status() const { return status_; }

 private:
  TokenStream* ts_;
  Status status_;
};

}  // namespace keel::jinja
