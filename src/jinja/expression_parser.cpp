// ExpressionParser implementation; the grammar and precedence follow Jinja2's parser (see the
// header), so that templates written for Jinja2 group the same way here.
#include "jinja/expression_parser.h"

#include <algorithm>

namespace keel::jinja {

Status ExpressionParser::seal(Expr* e) const {
  int depth = 0;
  for (const ExprPtr& child : e->children) {
    if (child) depth = std::max(depth, child->depth);
  }
  for (const auto& kw : e->kwargs) depth = std::max(depth, kw.second->depth);
  e->depth = depth + 1;
  if (e->depth > kMaxExprDepth) {
    return TokenStream::error_at(
        ts_->peek(), "expression nests deeper than " + std::to_string(kMaxExprDepth) + " levels");
  }
  return Status();
}

ExprPtr ExpressionParser::make(ExprKind kind, const Token& at) const {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = at.line;
  e->column = at.column;
  return e;
}

Result<ExprPtr> ExpressionParser::parse_expression(bool with_condexpr) {
  return with_condexpr ? parse_condexpr() : parse_or();
}

Result<ExprPtr> ExpressionParser::parse_tuple(bool with_condexpr) {
  const Token start = ts_->peek();
  KEEL_ASSIGN_OR_RETURN(ExprPtr first, parse_expression(with_condexpr));
  if (!ts_->at_op(",")) return first;
  ExprPtr tuple = make(ExprKind::kList, start);
  tuple->children.push_back(std::move(first));
  while (ts_->skip_op(",")) {
    TokenKind k = ts_->peek().kind;
    if (k == TokenKind::kVarEnd || k == TokenKind::kBlockEnd || ts_->at_op(")")) break;
    KEEL_ASSIGN_OR_RETURN(ExprPtr item, parse_expression(with_condexpr));
    tuple->children.push_back(std::move(item));
  }
  KEEL_TRY(seal(tuple.get()));
  return tuple;
}

Result<ExprPtr> ExpressionParser::parse_condexpr() {
  KEEL_ASSIGN_OR_RETURN(ExprPtr expr, parse_or());
  while (ts_->at_name("if")) {
    const Token at = ts_->next();
    ExprPtr cond_node = make(ExprKind::kCondition, at);
    KEEL_ASSIGN_OR_RETURN(ExprPtr cond, parse_or());
    ExprPtr otherwise;
    if (ts_->skip_name("else")) {
      KEEL_ASSIGN_OR_RETURN(otherwise, parse_condexpr());
    }
    cond_node->children.push_back(std::move(expr));
    cond_node->children.push_back(std::move(cond));
    cond_node->children.push_back(std::move(otherwise));
    KEEL_TRY(seal(cond_node.get()));
    expr = std::move(cond_node);
  }
  return expr;
}

Result<ExprPtr> ExpressionParser::binary(ExprPtr node, ExprPtr left, ExprPtr right) const {
  node->children.push_back(std::move(left));
  node->children.push_back(std::move(right));
  KEEL_TRY(seal(node.get()));
  return node;
}

Result<ExprPtr> ExpressionParser::parse_or() {
  KEEL_ASSIGN_OR_RETURN(ExprPtr left, parse_and());
  while (ts_->at_name("or")) {
    ExprPtr node = make(ExprKind::kOr, ts_->next());
    KEEL_ASSIGN_OR_RETURN(ExprPtr right, parse_and());
    KEEL_ASSIGN_OR_RETURN(left, binary(std::move(node), std::move(left), std::move(right)));
  }
  return left;
}

Result<ExprPtr> ExpressionParser::parse_and() {
  KEEL_ASSIGN_OR_RETURN(ExprPtr left, parse_not());
  while (ts_->at_name("and")) {
    ExprPtr node = make(ExprKind::kAnd, ts_->next());
    KEEL_ASSIGN_OR_RETURN(ExprPtr right, parse_not());
    KEEL_ASSIGN_OR_RETURN(left, binary(std::move(node), std::move(left), std::move(right)));
  }
  return left;
}

Result<ExprPtr> ExpressionParser::parse_not() {
  if (!ts_->at_name("not")) return parse_compare();
  NestingGuard guard(ts_);
  KEEL_TRY(guard.status());
  ExprPtr node = make(ExprKind::kNot, ts_->next());
  KEEL_ASSIGN_OR_RETURN(ExprPtr operand, parse_not());
  node->children.push_back(std::move(operand));
  KEEL_TRY(seal(node.get()));
  return node;
}

Result<ExprPtr> ExpressionParser::parse_compare() {
  const Token start = ts_->peek();
  KEEL_ASSIGN_OR_RETURN(ExprPtr first, parse_math1());
  ExprPtr node;
  while (true) {
    std::string op;
    const Token& t = ts_->peek();
    if (t.kind == TokenKind::kOperator && (t.text == "==" || t.text == "!=" || t.text == "<" ||
                                           t.text == "<=" || t.text == ">" || t.text == ">=")) {
      op = ts_->next().text;
    } else if (ts_->skip_name("in")) {
      op = "in";
    } else if (ts_->at_name("not") && ts_->at_name("in", 1)) {
      ts_->next();
      ts_->next();
      op = "notin";
    } else {
      break;
    }
    if (!node) {
      node = make(ExprKind::kCompare, start);
      node->children.push_back(std::move(first));
    }
    KEEL_ASSIGN_OR_RETURN(ExprPtr rhs, parse_math1());
    node->ops.push_back(op);
    node->children.push_back(std::move(rhs));
  }
  if (!node) return first;
  KEEL_TRY(seal(node.get()));
  return node;
}

Result<ExprPtr> ExpressionParser::parse_math1() {
  KEEL_ASSIGN_OR_RETURN(ExprPtr left, parse_concat());
  while (ts_->at_op("+") || ts_->at_op("-")) {
    ExprPtr node = make(ExprKind::kBinary, ts_->peek());
    node->name = ts_->next().text;
    KEEL_ASSIGN_OR_RETURN(ExprPtr right, parse_concat());
    KEEL_ASSIGN_OR_RETURN(left, binary(std::move(node), std::move(left), std::move(right)));
  }
  return left;
}

Result<ExprPtr> ExpressionParser::parse_concat() {
  const Token start = ts_->peek();
  KEEL_ASSIGN_OR_RETURN(ExprPtr first, parse_math2());
  if (!ts_->at_op("~")) return first;
  ExprPtr node = make(ExprKind::kConcat, start);
  node->children.push_back(std::move(first));
  while (ts_->skip_op("~")) {
    KEEL_ASSIGN_OR_RETURN(ExprPtr next, parse_math2());
    node->children.push_back(std::move(next));
  }
  KEEL_TRY(seal(node.get()));
  return node;
}

Result<ExprPtr> ExpressionParser::parse_math2() {
  KEEL_ASSIGN_OR_RETURN(ExprPtr left, parse_pow());
  while (ts_->at_op("*") || ts_->at_op("/") || ts_->at_op("//") || ts_->at_op("%")) {
    ExprPtr node = make(ExprKind::kBinary, ts_->peek());
    node->name = ts_->next().text;
    KEEL_ASSIGN_OR_RETURN(ExprPtr right, parse_pow());
    KEEL_ASSIGN_OR_RETURN(left, binary(std::move(node), std::move(left), std::move(right)));
  }
  return left;
}

Result<ExprPtr> ExpressionParser::parse_pow() {
  KEEL_ASSIGN_OR_RETURN(ExprPtr left, parse_unary(true));
  while (ts_->at_op("**")) {
    ExprPtr node = make(ExprKind::kBinary, ts_->peek());
    node->name = ts_->next().text;
    KEEL_ASSIGN_OR_RETURN(ExprPtr right, parse_unary(true));
    KEEL_ASSIGN_OR_RETURN(left, binary(std::move(node), std::move(left), std::move(right)));
  }
  return left;
}

Result<ExprPtr> ExpressionParser::parse_unary(bool with_filter) {
  NestingGuard guard(ts_);
  KEEL_TRY(guard.status());
  ExprPtr node;
  if (ts_->at_op("-") || ts_->at_op("+")) {
    const Token& at = ts_->next();
    node = make(at.text == "-" ? ExprKind::kNeg : ExprKind::kPos, at);
    KEEL_ASSIGN_OR_RETURN(ExprPtr operand, parse_unary(false));
    node->children.push_back(std::move(operand));
    KEEL_TRY(seal(node.get()));
  } else {
    KEEL_ASSIGN_OR_RETURN(node, parse_primary());
  }
  KEEL_ASSIGN_OR_RETURN(node, parse_postfix(std::move(node)));
  if (with_filter) {
    KEEL_ASSIGN_OR_RETURN(node, parse_filter_expr(std::move(node)));
  }
  return node;
}

Result<ExprPtr> ExpressionParser::parse_primary() {
  const Token& t = ts_->peek();
  ExprPtr node = make(ExprKind::kLiteral, t);
  switch (t.kind) {
    case TokenKind::kName:
      if (t.text == "true" || t.text == "True") {
        node->literal = Value(true);
      } else if (t.text == "false" || t.text == "False") {
        node->literal = Value(false);
      } else if (t.text == "none" || t.text == "None") {
        node->literal = Value::none();
      } else {
        node->kind = ExprKind::kName;
        node->name = t.text;
      }
      ts_->next();
      return node;
    case TokenKind::kString: {
      std::string s;
      while (ts_->peek().kind == TokenKind::kString) s += ts_->next().text;
      node->literal = Value(std::move(s));
      return node;
    }
    case TokenKind::kInt:
      node->literal = Value(ts_->next().int_value);
      return node;
    case TokenKind::kFloat:
      node->literal = Value(ts_->next().float_value);
      return node;
    case TokenKind::kOperator:
      if (t.text == "(") {
        ts_->next();
        if (ts_->skip_op(")")) {
          node->kind = ExprKind::kList;  // empty tuple
          return node;
        }
        KEEL_ASSIGN_OR_RETURN(ExprPtr inner, parse_tuple(true));
        KEEL_TRY(ts_->expect_op(")"));
        return inner;
      }
      if (t.text == "[") {
        ts_->next();
        return parse_sequence("]", std::move(node));
      }
      if (t.text == "{") {
        ts_->next();
        return parse_dict();
      }
      break;
    default:
      break;
  }
  return ts_->error("expected an expression, found " + ts_->describe());
}

// Items up to `close` (already past the opener); `node` becomes the kList.
Result<ExprPtr> ExpressionParser::parse_sequence(std::string_view close, ExprPtr node) {
  node->kind = ExprKind::kList;
  while (!ts_->at_op(close)) {
    if (!node->children.empty()) KEEL_TRY(ts_->expect_op(","));
    if (ts_->at_op(close)) break;  // trailing comma
    KEEL_ASSIGN_OR_RETURN(ExprPtr item, parse_expression(true));
    node->children.push_back(std::move(item));
  }
  KEEL_TRY(ts_->expect_op(close));
  KEEL_TRY(seal(node.get()));
  return node;
}

Result<ExprPtr> ExpressionParser::parse_dict() {
  ExprPtr node = make(ExprKind::kDict, ts_->peek());
  while (!ts_->at_op("}")) {
    if (!node->children.empty()) KEEL_TRY(ts_->expect_op(","));
    if (ts_->at_op("}")) break;
    KEEL_ASSIGN_OR_RETURN(ExprPtr key, parse_expression(true));
    KEEL_TRY(ts_->expect_op(":"));
    KEEL_ASSIGN_OR_RETURN(ExprPtr value, parse_expression(true));
    node->children.push_back(std::move(key));
    node->children.push_back(std::move(value));
  }
  KEEL_TRY(ts_->expect_op("}"));
  KEEL_TRY(seal(node.get()));
  return node;
}

Result<ExprPtr> ExpressionParser::parse_postfix(ExprPtr node) {
  while (true) {
    if (ts_->at_op(".") || ts_->at_op("[")) {
      KEEL_ASSIGN_OR_RETURN(node, parse_subscript(std::move(node)));
    } else if (ts_->at_op("(")) {
      ExprPtr call = make(ExprKind::kCall, ts_->peek());
      call->line = node->line;  // errors of a call point at its callee
      call->column = node->column;
      call->children.push_back(std::move(node));
      KEEL_TRY(parse_call_args(call.get()));
      KEEL_TRY(seal(call.get()));
      node = std::move(call);
    } else {
      return node;
    }
  }
}

Result<ExprPtr> ExpressionParser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (ts_->at_op("|")) {
      ExprPtr filter = make(ExprKind::kFilter, ts_->next());
      KEEL_ASSIGN_OR_RETURN(filter->name, ts_->expect_name());
      while (ts_->skip_op(".")) {
        KEEL_ASSIGN_OR_RETURN(std::string part, ts_->expect_name());
        filter->name += "." + part;
      }
      filter->children.push_back(std::move(node));
      if (ts_->at_op("(")) KEEL_TRY(parse_call_args(filter.get()));
      KEEL_TRY(seal(filter.get()));
      node = std::move(filter);
    } else if (ts_->at_name("is")) {
      ExprPtr test = make(ExprKind::kTest, ts_->next());
      test->negated = ts_->skip_name("not");
      KEEL_ASSIGN_OR_RETURN(test->name, ts_->expect_name());
      test->children.push_back(std::move(node));
      const Token& t = ts_->peek();
      if (ts_->at_op("(")) {
        KEEL_TRY(parse_call_args(test.get()));
      } else if ((t.kind == TokenKind::kName && t.text != "else" && t.text != "or" &&
                  t.text != "and") ||
                 t.kind == TokenKind::kString || t.kind == TokenKind::kInt ||
                 t.kind == TokenKind::kFloat || ts_->at_op("[") || ts_->at_op("{")) {
        if (ts_->at_name("is")) return ts_->error("tests cannot be chained with 'is'");
        KEEL_ASSIGN_OR_RETURN(ExprPtr arg, parse_primary());
        KEEL_ASSIGN_OR_RETURN(arg, parse_postfix(std::move(arg)));
        test->children.push_back(std::move(arg));
      }
      KEEL_TRY(seal(test.get()));
      node = std::move(test);
    } else if (ts_->at_op("(")) {
      ExprPtr call = make(ExprKind::kCall, ts_->peek());
      call->line = node->line;  // errors of a call point at its callee
      call->column = node->column;
      call->children.push_back(std::move(node));
      KEEL_TRY(parse_call_args(call.get()));
      KEEL_TRY(seal(call.get()));
      node = std::move(call);
    } else {
      return node;
    }
  }
}

Result<ExprPtr> ExpressionParser::parse_subscript(ExprPtr node) {
  const Token at = ts_->next();
  if (at.text == ".") {
    const Token& t = ts_->peek();
    if (t.kind == TokenKind::kName) {
      ExprPtr attr = make(ExprKind::kGetAttr, at);
      attr->name = ts_->next().text;
      attr->children.push_back(std::move(node));
      KEEL_TRY(seal(attr.get()));
      return attr;
    }
    if (t.kind == TokenKind::kInt) {
      ExprPtr item = make(ExprKind::kGetItem, at);
      ExprPtr index = make(ExprKind::kLiteral, t);
      index->literal = Value(ts_->next().int_value);
      item->children.push_back(std::move(node));
      item->children.push_back(std::move(index));
      KEEL_TRY(seal(item.get()));
      return item;
    }
    return ts_->error("expected an attribute name after '.', found " + ts_->describe());
  }
  // '['
  KEEL_ASSIGN_OR_RETURN(ExprPtr sub, parse_subscribed());
  if (ts_->at_op(",")) return ts_->error("multi-dimensional subscripts are not supported");
  KEEL_TRY(ts_->expect_op("]"));
  if (sub->kind == ExprKind::kSlice && sub->line == -1) {
    sub->line = at.line;
    sub->column = at.column;
    sub->children[0] = std::move(node);
    KEEL_TRY(seal(sub.get()));
    return sub;
  }
  ExprPtr item = make(ExprKind::kGetItem, at);
  item->children.push_back(std::move(node));
  item->children.push_back(std::move(sub));
  KEEL_TRY(seal(item.get()));
  return item;
}

// One subscript: an expression, or a slice `a:b:c` with any part missing. A slice comes back as
// kSlice with line -1 and children [null, start, stop, step] for parse_subscript to complete.
Result<ExprPtr> ExpressionParser::parse_subscribed() {
  ExprPtr start;
  if (!ts_->at_op(":")) {
    KEEL_ASSIGN_OR_RETURN(start, parse_expression(true));
    if (!ts_->at_op(":")) return start;
  }
  ts_->next();  // ':'
  auto slice = std::make_unique<Expr>();
  slice->kind = ExprKind::kSlice;
  slice->line = -1;
  ExprPtr stop;
  ExprPtr step;
  if (!ts_->at_op(":") && !ts_->at_op("]") && !ts_->at_op(",")) {
    KEEL_ASSIGN_OR_RETURN(stop, parse_expression(true));
  }
  if (ts_->skip_op(":")) {
    if (!ts_->at_op("]") && !ts_->at_op(",")) {
      KEEL_ASSIGN_OR_RETURN(step, parse_expression(true));
    }
  }
  slice->children.push_back(nullptr);
  slice->children.push_back(std::move(start));
  slice->children.push_back(std::move(stop));
  slice->children.push_back(std::move(step));
  return ExprPtr(std::move(slice));
}

Status ExpressionParser::parse_call_args(Expr* node) {
  KEEL_TRY(ts_->expect_op("("));
  bool first = true;
  while (!ts_->at_op(")")) {
    if (!first) KEEL_TRY(ts_->expect_op(","));
    first = false;
    if (ts_->at_op(")")) break;
    if (ts_->at_op("*") || ts_->at_op("**")) {
      return ts_->error("*args and **kwargs in calls are not supported");
    }
    if (ts_->peek().kind == TokenKind::kName && ts_->at_op("=", 1)) {
      std::string key = ts_->next().text;
      ts_->next();  // '='
      KEEL_ASSIGN_OR_RETURN(ExprPtr value, parse_expression(true));
      node->kwargs.emplace_back(std::move(key), std::move(value));
    } else {
      if (!node->kwargs.empty()) {
        return ts_->error("positional argument follows keyword argument");
      }
      KEEL_ASSIGN_OR_RETURN(ExprPtr value, parse_expression(true));
      node->children.push_back(std::move(value));
    }
  }
  return ts_->expect_op(")");
}

}  // namespace keel::jinja
