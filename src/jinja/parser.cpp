// Statement parser: walks the token stream, delegating expressions to ExpressionParser, and
// builds the Node tree. Every block remembers its opening tag so that an unclosed block is
// reported where it starts.
#include "jinja/parser.h"

#include <initializer_list>

#include "jinja/expression_parser.h"
#include "jinja/token_stream.h"

namespace keel::jinja {
namespace {

class StatementParser {
 public:
  StatementParser(std::vector<Token> tokens, int max_nesting)
      : ts_(std::move(tokens), max_nesting), expr_(&ts_) {}

  Result<NodeList> run() {
    std::string matched;
    return parse_body({}, &matched, ts_.peek(), "");
  }

 private:
  NodePtr make(NodeKind kind, const Token& at) const {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->line = at.line;
    n->column = at.column;
    return n;
  }

  // Parses until a block tag whose keyword is in `end_tags` (consumed up to the keyword, which
  // goes to *matched) or, when end_tags is empty, the end of the template.
  Result<NodeList> parse_body(std::initializer_list<std::string_view> end_tags,
                              std::string* matched, const Token& opener,
                              std::string_view opener_name) {
    NodeList out;
    while (true) {
      const Token& t = ts_.peek();
      switch (t.kind) {
        case TokenKind::kText: {
          NodePtr n = make(NodeKind::kText, t);
          n->text = ts_.next().text;
          out.push_back(std::move(n));
          break;
        }
        case TokenKind::kVarBegin: {
          NodePtr n = make(NodeKind::kOutput, ts_.next());
          KEEL_ASSIGN_OR_RETURN(n->expr, expr_.parse_tuple(true));
          KEEL_TRY(ts_.expect(TokenKind::kVarEnd, "'}}'"));
          out.push_back(std::move(n));
          break;
        }
        case TokenKind::kBlockBegin: {
          const Token& keyword = ts_.peek(1);
          if (keyword.kind == TokenKind::kName) {
            for (std::string_view end : end_tags) {
              if (keyword.text == end) {
                ts_.next();
                *matched = ts_.next().text;
                return out;
              }
            }
          }
          const Token at = ts_.next();
          KEEL_ASSIGN_OR_RETURN(NodePtr n, parse_statement(at));
          if (n) out.push_back(std::move(n));
          break;
        }
        case TokenKind::kEnd: {
          if (end_tags.size() == 0) return out;
          std::string expected;
          for (std::string_view e : end_tags) {
            expected += expected.empty() ? "'" : " or '";
            expected += std::string(e) + "'";
          }
          return TokenStream::error_at(opener, "'" + std::string(opener_name) +
                                                   "' block is never closed (expected " + expected +
                                                   ")");
        }
        default:
          return ts_.error("unexpected " + ts_.describe());
      }
    }
  }

  Result<NodePtr> parse_statement(const Token& at) {
    NestingGuard guard(&ts_);
    KEEL_TRY(guard.status());
    if (ts_.peek().kind != TokenKind::kName) {
      return ts_.error("expected a tag name after '{%', found " + ts_.describe());
    }
    const std::string keyword = ts_.next().text;
    if (keyword == "if") return parse_if(at);
    if (keyword == "for") return parse_for(at);
    if (keyword == "set") return parse_set(at);
    if (keyword == "macro") return parse_macro(at);
    if (keyword == "generation") return parse_generation(at);
    if (keyword == "break" || keyword == "continue") {
      if (loop_depth_ == 0) {
        return TokenStream::error_at(at, "'" + keyword + "' outside of a for loop");
      }
      KEEL_TRY(ts_.expect(TokenKind::kBlockEnd, "'%}'"));
      return make(keyword == "break" ? NodeKind::kBreak : NodeKind::kContinue, at);
    }
    static constexpr std::string_view kUnsupported[] = {
        "include", "import", "from", "extends",    "block", "call",
        "filter",  "with",   "do",   "autoescape", "trans"};
    for (std::string_view u : kUnsupported) {
      if (keyword == u) return TokenStream::error_at(at, "unsupported tag '" + keyword + "'");
    }
    return TokenStream::error_at(at, "unknown or misplaced tag '" + keyword + "'");
  }

  Status end_tag() { return ts_.expect(TokenKind::kBlockEnd, "'%}'"); }

  Result<NodePtr> parse_if(const Token& at) {
    NodePtr n = make(NodeKind::kIf, at);
    KEEL_ASSIGN_OR_RETURN(ExprPtr cond, expr_.parse_tuple(false));
    KEEL_TRY(end_tag());
    while (true) {
      std::string matched;
      KEEL_ASSIGN_OR_RETURN(NodeList body,
                            parse_body({"elif", "else", "endif"}, &matched, at, "if"));
      n->branches.emplace_back(std::move(cond), std::move(body));
      if (matched == "elif") {
        KEEL_ASSIGN_OR_RETURN(cond, expr_.parse_tuple(false));
        KEEL_TRY(end_tag());
        continue;
      }
      if (matched == "else") {
        KEEL_TRY(end_tag());
        KEEL_ASSIGN_OR_RETURN(NodeList else_body, parse_body({"endif"}, &matched, at, "if"));
        n->branches.emplace_back(nullptr, std::move(else_body));
      }
      KEEL_TRY(end_tag());
      return n;
    }
  }

  // Names separated by commas, optionally in parentheses: `x`, `k, v`, `(k, v)`.
  Result<std::vector<std::string>> parse_targets() {
    bool paren = ts_.skip_op("(");
    std::vector<std::string> names;
    do {
      KEEL_ASSIGN_OR_RETURN(std::string name, ts_.expect_name());
      names.push_back(std::move(name));
    } while (ts_.skip_op(","));
    if (paren) KEEL_TRY(ts_.expect_op(")"));
    return names;
  }

  Result<NodePtr> parse_for(const Token& at) {
    NodePtr n = make(NodeKind::kFor, at);
    KEEL_ASSIGN_OR_RETURN(n->targets, parse_targets());
    if (!ts_.skip_name("in"))
      return ts_.error("expected 'in' in for loop, found " + ts_.describe());
    KEEL_ASSIGN_OR_RETURN(n->expr, expr_.parse_tuple(false));
    if (ts_.skip_name("if")) {
      KEEL_ASSIGN_OR_RETURN(n->condition, expr_.parse_expression(true));
    }
    if (ts_.at_name("recursive")) return ts_.error("recursive loops are not supported");
    KEEL_TRY(end_tag());
    ++loop_depth_;
    std::string matched;
    auto body = parse_body({"endfor", "else"}, &matched, at, "for");
    --loop_depth_;
    if (!body.ok()) return body.error();
    n->body = std::move(*body);
    if (matched == "else") {
      KEEL_TRY(end_tag());
      KEEL_ASSIGN_OR_RETURN(n->else_body, parse_body({"endfor"}, &matched, at, "for"));
    }
    KEEL_TRY(end_tag());
    return n;
  }

  Result<NodePtr> parse_set(const Token& at) {
    NodePtr n = make(NodeKind::kSet, at);
    KEEL_ASSIGN_OR_RETURN(std::string first, ts_.expect_name());
    n->targets.push_back(std::move(first));
    if (ts_.skip_op(".")) {
      KEEL_ASSIGN_OR_RETURN(n->attr, ts_.expect_name());
    } else {
      while (ts_.skip_op(",")) {
        KEEL_ASSIGN_OR_RETURN(std::string name, ts_.expect_name());
        n->targets.push_back(std::move(name));
      }
    }
    if (ts_.skip_op("=")) {
      KEEL_ASSIGN_OR_RETURN(n->expr, expr_.parse_tuple(true));
      KEEL_TRY(end_tag());
      return n;
    }
    if (n->targets.size() != 1 || !n->attr.empty()) {
      return ts_.error("expected '=' in set, found " + ts_.describe());
    }
    if (ts_.at_op("|")) return ts_.error("filtered block assignments are not supported");
    KEEL_TRY(end_tag());
    n->kind = NodeKind::kSetBlock;
    std::string matched;
    KEEL_ASSIGN_OR_RETURN(n->body, parse_body({"endset"}, &matched, at, "set"));
    KEEL_TRY(end_tag());
    return n;
  }

  Result<NodePtr> parse_macro(const Token& at) {
    NodePtr n = make(NodeKind::kMacro, at);
    KEEL_ASSIGN_OR_RETURN(n->name, ts_.expect_name());
    KEEL_TRY(ts_.expect_op("("));
    while (!ts_.at_op(")")) {
      if (!n->targets.empty()) KEEL_TRY(ts_.expect_op(","));
      if (ts_.at_op(")")) break;
      KEEL_ASSIGN_OR_RETURN(std::string param, ts_.expect_name());
      ExprPtr def;
      if (ts_.skip_op("=")) {
        KEEL_ASSIGN_OR_RETURN(def, expr_.parse_expression(true));
      } else if (!n->defaults.empty() && n->defaults.back() != nullptr) {
        return ts_.error("macro parameter '" + param + "' without a default follows one with");
      }
      n->targets.push_back(std::move(param));
      n->defaults.push_back(std::move(def));
    }
    KEEL_TRY(ts_.expect_op(")"));
    KEEL_TRY(end_tag());
    int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    std::string matched;
    auto body = parse_body({"endmacro"}, &matched, at, "macro");
    loop_depth_ = saved_loop_depth;
    if (!body.ok()) return body.error();
    n->body = std::move(*body);
    if (ts_.peek().kind == TokenKind::kName) ts_.next();  // {% endmacro name %}
    KEEL_TRY(end_tag());
    return n;
  }

  Result<NodePtr> parse_generation(const Token& at) {
    NodePtr n = make(NodeKind::kGeneration, at);
    KEEL_TRY(end_tag());
    std::string matched;
    KEEL_ASSIGN_OR_RETURN(n->body, parse_body({"endgeneration"}, &matched, at, "generation"));
    KEEL_TRY(end_tag());
    return n;
  }

  TokenStream ts_;
  ExpressionParser expr_;
  int loop_depth_ = 0;
};

}  // namespace

Result<NodeList> parse_template(std::string_view source, const ParseOptions& options) {
  KEEL_ASSIGN_OR_RETURN(std::vector<Token> tokens, tokenize(source, options.lex));
  StatementParser parser(std::move(tokens), options.max_nesting);
  return parser.run();
}

}  // namespace keel::jinja
