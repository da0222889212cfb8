// ExpressionParser: Jinja2 expressions by recursive descent with Jinja2's precedence, lowest
// first: `a if c else b`, or, and, not, comparisons (== != < <= > >= in, not in; chained), + -,
// ~, * / // %, **, unary - +, then postfix `.attr`, `[index]`, `[a:b:c]`, calls, and last the
// `| filter(args)` and `is [not] test(args)` chains (so `a + b | trim` trims b only).
// Literals: strings (adjacent ones concatenate), integers, floats, true/false/none (any case
// Jinja accepts), lists, tuples (as lists) and dicts.
//
// Thread safety: one owner (a single parse).
#pragma once

#include "jinja/ast.h"
#include "jinja/token_stream.h"

namespace keel::jinja {

// Deepest expression tree accepted (a chain `a + b + c ...` is as deep as it is long).
inline constexpr int kMaxExprDepth = 128;

class ExpressionParser {
 public:
  explicit ExpressionParser(TokenStream* ts) : ts_(ts) {}

  Result<ExprPtr> parse_expression(bool with_condexpr = true);
  // An expression, or several separated by commas (a tuple, built as a list): `1, 2`.
  Result<ExprPtr> parse_tuple(bool with_condexpr = true);

 private:
  Result<ExprPtr> parse_condexpr();
  Result<ExprPtr> parse_or();
  Result<ExprPtr> parse_and();
  Result<ExprPtr> parse_not();
  Result<ExprPtr> parse_compare();
  Result<ExprPtr> parse_math1();
  Result<ExprPtr> parse_concat();
  Result<ExprPtr> parse_math2();
  Result<ExprPtr> parse_pow();
  Result<ExprPtr> parse_unary(bool with_filter);
  Result<ExprPtr> parse_primary();
  Result<ExprPtr> parse_sequence(std::string_view close, ExprPtr first);
  Result<ExprPtr> parse_dict();
  Result<ExprPtr> parse_postfix(ExprPtr node);
  Result<ExprPtr> parse_filter_expr(ExprPtr node);
  Result<ExprPtr> parse_subscript(ExprPtr node);
  Result<ExprPtr> parse_subscribed();
  // Parses `(args, key=value)` into node->children (after those present) and node->kwargs.
  Status parse_call_args(Expr* node);
  ExprPtr make(ExprKind kind, const Token& at) const;
  // Sets e->depth from its children; fails past kMaxExprDepth, so that evaluating (and
  // destroying) any tree stays within a fixed stack budget however the operators chain.
  Status seal(Expr* e) const;
  // `node` with children (left, right), sealed: the step of every left-associative operator loop.
  Result<ExprPtr> binary(ExprPtr node, ExprPtr left, ExprPtr right) const;

  TokenStream* ts_;
};

}  // namespace keel::jinja
