// Syntax tree of a parsed template: expressions (Expr) and statements (Node), both tagged
// structs whose fields are used according to their kind (documented per field). Produced by the
// parser, read-only afterwards.
//
// Thread safety: immutable after parsing; a tree may be rendered from several threads at once.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace keel::jinja {

enum class ExprKind {
  kLiteral,    // literal
  kName,       // name
  kList,       // children: items (tuples are lists too)
  kDict,       // children: key0, value0, key1, value1, ...
  kGetAttr,    // children[0].name
  kGetItem,    // children[0][children[1]]
  kSlice,      // children[0][c1:c2:c3]; missing parts are null
  kCall,       // children[0](children[1..], kwargs)
  kFilter,     // children[0] | name(children[1..], kwargs)
  kTest,       // children[0] is [not] name(children[1..], kwargs)
  kNot,        // not children[0]
  kNeg,        // -children[0]
  kPos,        // +children[0]
  kBinary,     // children[0] name children[1], name in + - * / // % **
  kConcat,     // children[0] ~ children[1] ~ ...
  kCompare,    // children[0] ops[0] children[1] ops[1] children[2] ... (chained, as Python)
  kAnd,        // children[0] and children[1]
  kOr,         // children[0] or children[1]
  kCondition,  // children[0] if children[1] else children[2] (children[2] may be null)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  int line = 0;
  int column = 0;
  Value literal;                  // kLiteral
  std::string name;               // kName, kGetAttr, kFilter, kTest, kBinary operator
  std::vector<ExprPtr> children;  // see ExprKind
  std::vector<std::string> ops;   // kCompare: == != < <= > >= in notin
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // kCall, kFilter, kTest
  bool negated = false;                                 // kTest: `is not`
  int depth = 1;  // height of this subtree (set by the parser, bounded by kMaxExprDepth)
};

enum class NodeKind {
  kText,        // text
  kOutput,      // {{ expr }}
  kIf,          // branches: (condition, body)...; the else branch has a null condition
  kFor,         // for targets in expr [if condition] : body [else else_body]
  kSet,         // set targets (or targets[0].attr) = expr
  kSetBlock,    // set targets[0] %} body {% endset
  kMacro,       // macro name(targets = defaults) : body
  kBreak,       // break (loop controls)
  kContinue,    // continue
  kGeneration,  // {% generation %} body {% endgeneration %}: rendered as is
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using NodeList = std::vector<NodePtr>;

struct Node {
  NodeKind kind = NodeKind::kText;
  int line = 0;
  int column = 0;
  std::string text;                                    // kText
  std::string name;                                    // kMacro name
  std::string attr;                                    // kSet: non-empty for `set ns.attr = ...`
  std::vector<std::string> targets;                    // kFor / kSet names; kMacro parameter names
  ExprPtr expr;                                        // kOutput, kFor iterable, kSet value
  ExprPtr condition;                                   // kFor: the `if` filter (may be null)
  std::vector<std::pair<ExprPtr, NodeList>> branches;  // kIf
  NodeList body;                                       // kFor, kSetBlock, kMacro, kGeneration
  NodeList else_body;                                  // kFor
  std::vector<ExprPtr> defaults;                       // kMacro: per parameter, null when none
};

}  // namespace keel::jinja
