// Interpreter: statement execution and expression evaluation (operators live in operators.cpp,
// built-ins in filters.cpp, tests.cpp and methods.cpp).
#include "jinja/interpreter.h"

#include "jinja/plain_spans.h"
#include "jinja/py_string.h"

namespace keel::jinja {
namespace {

std::string located_prefix(int line, int column) {
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

// Adds "line L, column C: " unless the message already carries a location.
Status locate(const Status& s, int line, int column) {
  if (s.ok() || s.message().rfind("line ", 0) == 0) return s;
  return s.with_prefix(located_prefix(line, column));
}

Status undefined_error(const Value& v) {
  const std::string& name = v.undefined_name();
  return Status::invalid_argument(name.empty() ? "value is undefined"
                                               : "'" + name + "' is undefined");
}

}  // namespace

Interpreter::Interpreter(const RenderEnv& env, const Dict& variables) : env_(env) {
  ctx_.max_work = env.limits.max_work;
  ctx_.now = env.now ? env.now : [] { return std::chrono::system_clock::now(); };
  frames_.resize(2);
  for (auto& [name, value] : make_globals(&ctx_).entries) frames_[0].vars[name] = value;
  for (const auto& [name, value] : variables.entries) frames_[0].vars[name] = value;
}

Result<TrackedText> Interpreter::render(const NodeList& nodes) {
  TrackedText out;
  KEEL_ASSIGN_OR_RETURN(Flow flow, exec(nodes, &out));
  (void)flow;  // break/continue outside loops are rejected by the parser
  return out;
}

Status Interpreter::step() {
  if (++steps_ > env_.limits.max_steps) {
    return Status::resource_exhausted("template ran more than " +
                                      std::to_string(env_.limits.max_steps) +
                                      " loop iterations and macro calls");
  }
  return Status();
}

Status Interpreter::enter() {
  if (++eval_depth_ > env_.limits.max_eval_depth) {
    --eval_depth_;
    return Status::resource_exhausted("template evaluation nests deeper than " +
                                      std::to_string(env_.limits.max_eval_depth) + " levels");
  }
  return Status();
}

Status Interpreter::append(TrackedText* out, std::string_view text, const TextSpans* spans,
                           bool all_plain) const {
  if (out->text.size() + text.size() > env_.limits.max_output_bytes) {
    return Status::resource_exhausted("template output exceeds " +
                                      std::to_string(env_.limits.max_output_bytes) + " bytes");
  }
  const size_t offset = out->text.size();
  out->text.append(text);
  if (all_plain) {
    append_span(&out->plain, offset, out->text.size());
  } else if (spans != nullptr) {
    append_spans(&out->plain, *spans, 0, text.size(), offset);
  }
  return Status();
}

Status Interpreter::append_value(TrackedText* out, const Value& v) const {
  if (v.is_string()) return append(out, v.as_string(), &v.plain_spans());
  return append(out, v.to_str(), nullptr, holds_plain(v));
}

Value Interpreter::lookup(const std::string& name) const {
  for (size_t i = frames_.size(); i-- > 0;) {
    auto it = frames_[i].vars.find(name);
    if (it != frames_[i].vars.end()) return it->second;
    if (frames_[i].macro_boundary && i > 2) i = 2;  // continue with the top-level frames
  }
  return Value::undefined(name);
}

void Interpreter::assign(const std::string& name, Value value) {
  frames_.back().vars[name] = std::move(value);
}

Result<Interpreter::Flow> Interpreter::exec(const NodeList& nodes, TrackedText* out) {
  for (const NodePtr& node : nodes) {
    KEEL_ASSIGN_OR_RETURN(Flow flow, exec_node(*node, out));
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Result<Interpreter::Flow> Interpreter::exec_node(const Node& node, TrackedText* out) {
  KEEL_TRY(locate(enter(), node.line, node.column));
  auto flow = exec_node_inner(node, out);
  --eval_depth_;
  return flow;
}

Result<Interpreter::Flow> Interpreter::exec_node_inner(const Node& node, TrackedText* out) {
  switch (node.kind) {
    case NodeKind::kText:
      KEEL_TRY(locate(append(out, node.text), node.line, node.column));
      return Flow::kNormal;
    case NodeKind::kOutput: {
      KEEL_ASSIGN_OR_RETURN(Value v, eval(*node.expr));
      KEEL_TRY(locate(append_value(out, v), node.line, node.column));
      return Flow::kNormal;
    }
    case NodeKind::kIf:
      for (const auto& [cond, body] : node.branches) {
        bool take = true;
        if (cond) {
          KEEL_ASSIGN_OR_RETURN(Value c, eval(*cond));
          take = c.truthy();
        }
        if (take) return exec(body, out);
      }
      return Flow::kNormal;
    case NodeKind::kFor:
      return exec_for(node, out);
    case NodeKind::kSet:
    case NodeKind::kSetBlock:
      KEEL_TRY(exec_set(node));
      return Flow::kNormal;
    case NodeKind::kMacro:
      assign(node.name, make_macro(node));
      return Flow::kNormal;
    case NodeKind::kBreak:
      return Flow::kBreak;
    case NodeKind::kContinue:
      return Flow::kContinue;
    case NodeKind::kGeneration:
      return exec(node.body, out);
  }
  return Flow::kNormal;
}

namespace {

Dict loop_info(const Value::List& items, size_t i) {
  const auto n = static_cast<int64_t>(items.size());
  const auto idx = static_cast<int64_t>(i);
  Dict loop;
  loop.entries.reserve(12);
  loop.entries.emplace_back("index", Value(idx + 1));
  loop.entries.emplace_back("index0", Value(idx));
  loop.entries.emplace_back("revindex", Value(n - idx));
  loop.entries.emplace_back("revindex0", Value(n - idx - 1));
  loop.entries.emplace_back("first", Value(i == 0));
  loop.entries.emplace_back("last", Value(i + 1 == items.size()));
  loop.entries.emplace_back("length", Value(n));
  loop.entries.emplace_back("depth", Value(1));
  loop.entries.emplace_back("depth0", Value(0));
  loop.entries.emplace_back("previtem", i > 0 ? items[i - 1] : Value::undefined("loop.previtem"));
  loop.entries.emplace_back(
      "nextitem", i + 1 < items.size() ? items[i + 1] : Value::undefined("loop.nextitem"));
  loop.entries.emplace_back(
      "cycle", Value::make_callable("loop.cycle", [i](CallArgs& args) -> Result<Value> {
        if (args.positional.empty()) return Status::invalid_argument("loop.cycle: no items");
        return args.positional[i % args.positional.size()];
      }));
  return loop;
}

}  // namespace

Result<Interpreter::Flow> Interpreter::exec_for(const Node& node, TrackedText* out) {
  KEEL_ASSIGN_OR_RETURN(Value iterable, eval(*node.expr));
  auto listed = iterable_items(iterable);
  if (!listed.ok()) return locate(listed.error(), node.expr->line, node.expr->column);
  Value::List items = std::move(*listed);
  if (iterable.is_string() && !iterable.plain_spans().empty()) {  // characters keep their origin
    const std::vector<size_t> offsets = codepoint_offsets(iterable.as_string());
    for (size_t i = 0; i < items.size(); ++i) {
      items[i] = pick_chars_tracked(iterable, offsets, {i});
    }
  }
  KEEL_TRY(locate(ctx_.charge(16 * items.size()), node.line, node.column));
  if (node.condition) {
    Value::List kept;
    for (const Value& item : items) {
      KEEL_TRY(step());
      frames_.emplace_back();
      Status bound = bind_targets(node.targets, item, node);
      auto c = bound.ok() ? eval(*node.condition) : Result<Value>(bound);
      frames_.pop_back();
      if (!c.ok()) return c.error();
      if (c->truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec(node.else_body, out);
  for (size_t i = 0; i < items.size(); ++i) {
    KEEL_TRY(locate(step(), node.line, node.column));
    frames_.emplace_back();
    Status bound = bind_targets(node.targets, items[i], node);
    if (bound.ok()) frames_.back().vars["loop"] = Value(loop_info(items, i));
    auto flow = bound.ok() ? exec(node.body, out) : Result<Flow>(bound);
    frames_.pop_back();
    if (!flow.ok()) return flow.error();
    if (*flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Status Interpreter::bind_targets(const std::vector<std::string>& targets, const Value& value,
                                 const Node& at) {
  if (exceeds_depth(value, env_.limits.max_value_depth)) {
    return Status::resource_exhausted(located_prefix(at.line, at.column) +
                                      ": value nests deeper than " +
                                      std::to_string(env_.limits.max_value_depth) + " levels");
  }
  if (targets.size() == 1) {
    assign(targets[0], value);
    return Status();
  }
  if (!value.is_list() || value.as_list().size() != targets.size()) {
    return Status::invalid_argument(located_prefix(at.line, at.column) + ": cannot unpack " +
                                    std::string(value.type_name()) + " into " +
                                    std::to_string(targets.size()) + " names");
  }
  for (size_t i = 0; i < targets.size(); ++i) assign(targets[i], value.as_list()[i]);
  return Status();
}

Status Interpreter::exec_set(const Node& node) {
  Value value;
  if (node.kind == NodeKind::kSetBlock) {
    TrackedText captured;
    KEEL_ASSIGN_OR_RETURN(Flow flow, exec(node.body, &captured));
    (void)flow;
    value = Value::with_spans(std::move(captured.text), std::move(captured.plain));
  } else {
    KEEL_ASSIGN_OR_RETURN(value, eval(*node.expr));
  }
  if (node.attr.empty()) return bind_targets(node.targets, value, node);
  Value target = lookup(node.targets[0]);
  if (!target.is_namespace()) {
    return Status::invalid_argument(located_prefix(node.line, node.column) + ": cannot set '" +
                                    node.attr + "' on '" + node.targets[0] +
                                    "': not a namespace() object");
  }
  if (exceeds_depth(value, env_.limits.max_value_depth)) {
    return Status::resource_exhausted(located_prefix(node.line, node.column) +
                                      ": value nests too deeply");
  }
  if (holds_reference(value)) {
    return Status::unsupported(located_prefix(node.line, node.column) +
                               ": a namespace attribute cannot hold a namespace or a function");
  }
  target.namespace_attrs().set(node.attr, std::move(value));
  return Status();
}

Value Interpreter::make_macro(const Node& node) {
  const Node* macro = &node;
  return Value::make_callable(node.name, [this, macro](CallArgs& args) -> Result<Value> {
    return call_macro(*macro, args);
  });
}

Result<Value> Interpreter::call_macro(const Node& node, CallArgs& args) {
  KEEL_TRY(step());
  if (call_depth_ >= env_.limits.max_call_depth) {
    return Status::resource_exhausted("macro '" + node.name + "' calls nest deeper than " +
                                      std::to_string(env_.limits.max_call_depth));
  }
  if (args.positional.size() > node.targets.size()) {
    return Status::invalid_argument("macro '" + node.name + "' takes " +
                                    std::to_string(node.targets.size()) + " arguments, got " +
                                    std::to_string(args.positional.size()));
  }
  Frame frame;
  frame.macro_boundary = true;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    frame.vars[node.targets[i]] = args.positional[i];
  }
  for (auto& [key, value] : args.named) {
    bool known = false;
    for (const std::string& t : node.targets) known = known || t == key;
    if (!known) {
      return Status::invalid_argument("macro '" + node.name + "' has no parameter '" + key + "'");
    }
    frame.vars[key] = value;
  }
  frames_.push_back(std::move(frame));
  ++call_depth_;
  Status status;
  for (size_t i = 0; i < node.targets.size() && status.ok(); ++i) {
    if (frames_.back().vars.count(node.targets[i]) != 0) continue;
    if (node.defaults[i]) {
      auto d = eval(*node.defaults[i]);
      if (d.ok()) frames_.back().vars[node.targets[i]] = *d;
      status = d.status();
    } else {
      frames_.back().vars[node.targets[i]] = Value::undefined(node.targets[i]);
    }
  }
  TrackedText out;
  if (status.ok()) status = exec(node.body, &out).status();
  --call_depth_;
  frames_.pop_back();
  KEEL_TRY(status);
  return Value::with_spans(std::move(out.text), std::move(out.plain));
}

Result<Value> Interpreter::eval(const Expr& e) {
  KEEL_TRY(locate(enter(), e.line, e.column));
  auto r = eval_inner(e);
  --eval_depth_;
  if (!r.ok()) return locate(r.error(), e.line, e.column);
  return r;
}

Result<Value> Interpreter::eval_inner(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kLiteral:
      return e.literal;
    case ExprKind::kName:
      return lookup(e.name);
    case ExprKind::kList:
    case ExprKind::kDict:
      return eval_collection(e);
    case ExprKind::kGetAttr: {
      KEEL_ASSIGN_OR_RETURN(Value obj, eval(*e.children[0]));
      return get_attr(obj, e.name);
    }
    case ExprKind::kGetItem: {
      KEEL_ASSIGN_OR_RETURN(Value obj, eval(*e.children[0]));
      KEEL_ASSIGN_OR_RETURN(Value key, eval(*e.children[1]));
      return get_item(obj, key);
    }
    case ExprKind::kSlice:
      return eval_slice(e);
    case ExprKind::kCall:
      return eval_call(e);
    case ExprKind::kFilter:
      return eval_filter(e);
    case ExprKind::kTest:
      return eval_test(e);
    case ExprKind::kNot: {
      KEEL_ASSIGN_OR_RETURN(Value v, eval(*e.children[0]));
      return Value(!v.truthy());
    }
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      KEEL_ASSIGN_OR_RETURN(Value v, eval(*e.children[0]));
      if (v.is_undefined()) return undefined_error(v);
      if (!v.is_number()) {
        return Status::invalid_argument("bad operand type for unary " +
                                        std::string(e.kind == ExprKind::kNeg ? "-" : "+") + ": '" +
                                        std::string(v.type_name()) + "'");
      }
      if (e.kind == ExprKind::kPos) return v.is_bool() ? Value(v.as_int()) : v;
      if (v.is_float()) return Value(-v.as_double());
      return binary_op("-", Value(0), v, ctx_);
    }
    case ExprKind::kBinary:
      return eval_binary(e);
    case ExprKind::kConcat: {
      std::vector<Value> parts;
      parts.reserve(e.children.size());
      for (const ExprPtr& child : e.children) {
        KEEL_ASSIGN_OR_RETURN(Value v, eval(*child));
        if (!v.is_string()) v = holds_plain(v) ? Value::plain(v.to_str()) : Value(v.to_str());
        KEEL_TRY(ctx_.charge(v.as_string().size()));
        parts.push_back(std::move(v));
      }
      return concat_tracked(parts);
    }
    case ExprKind::kCompare:
      return eval_compare(e);
    case ExprKind::kAnd: {
      KEEL_ASSIGN_OR_RETURN(Value a, eval(*e.children[0]));
      if (!a.truthy()) return a;
      return eval(*e.children[1]);
    }
    case ExprKind::kOr: {
      KEEL_ASSIGN_OR_RETURN(Value a, eval(*e.children[0]));
      if (a.truthy()) return a;
      return eval(*e.children[1]);
    }
    case ExprKind::kCondition: {
      KEEL_ASSIGN_OR_RETURN(Value c, eval(*e.children[1]));
      if (c.truthy()) return eval(*e.children[0]);
      if (e.children[2]) return eval(*e.children[2]);
      return Value::undefined("");
    }
  }
  return Status::internal("unknown expression kind");
}

Result<Value> Interpreter::eval_collection(const Expr& e) {
  KEEL_TRY(ctx_.charge(16 * e.children.size()));
  if (e.kind == ExprKind::kList) {
    Value::List items;
    items.reserve(e.children.size());
    for (const ExprPtr& child : e.children) {
      KEEL_ASSIGN_OR_RETURN(Value v, eval(*child));
      items.push_back(std::move(v));
    }
    return Value(std::move(items));
  }
  Dict dict;
  for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
    KEEL_ASSIGN_OR_RETURN(Value key, eval(*e.children[i]));
    if (!key.is_string()) {
      return Status::invalid_argument("dict keys must be strings, not " +
                                      std::string(key.type_name()));
    }
    KEEL_ASSIGN_OR_RETURN(Value value, eval(*e.children[i + 1]));
    dict.set(key.as_string(), std::move(value));
  }
  return Value(std::move(dict));
}

Result<Value> Interpreter::eval_binary(const Expr& e) {
  KEEL_ASSIGN_OR_RETURN(Value a, eval(*e.children[0]));
  KEEL_ASSIGN_OR_RETURN(Value b, eval(*e.children[1]));
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  if (e.name == "+" && a.is_string() && b.is_string()) {  // exact: both sides keep their spans
    KEEL_TRY(ctx_.charge(a.as_string().size() + b.as_string().size()));
    return concat_tracked({a, b});
  }
  KEEL_ASSIGN_OR_RETURN(Value r, binary_op(e.name, a, b, ctx_));
  return taint_new_strings(std::move(r), {&a, &b});
}

Result<Value> Interpreter::eval_compare(const Expr& e) {
  KEEL_ASSIGN_OR_RETURN(Value left, eval(*e.children[0]));
  for (size_t i = 0; i < e.ops.size(); ++i) {
    KEEL_ASSIGN_OR_RETURN(Value right, eval(*e.children[i + 1]));
    const std::string& op = e.ops[i];
    bool result = false;
    if (op == "==" || op == "!=") {
      result = values_equal(left, right) == (op == "==");
    } else if (op == "in" || op == "notin") {
      KEEL_ASSIGN_OR_RETURN(bool found, contains(right, left));
      result = found == (op == "in");
    } else {
      if (left.is_undefined()) return undefined_error(left);
      if (right.is_undefined()) return undefined_error(right);
      KEEL_ASSIGN_OR_RETURN(int c, compare_values(left, right));
      result = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
    }
    if (!result) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Status Interpreter::eval_args(const Expr& e, size_t first_child, CallArgs* args) {
  for (size_t i = first_child; i < e.children.size(); ++i) {
    KEEL_ASSIGN_OR_RETURN(Value v, eval(*e.children[i]));
    args->positional.push_back(std::move(v));
  }
  for (const auto& [key, expr] : e.kwargs) {
    KEEL_ASSIGN_OR_RETURN(Value v, eval(*expr));
    args->named.emplace_back(key, std::move(v));
  }
  return Status();
}

Result<Value> Interpreter::eval_call(const Expr& e) {
  KEEL_ASSIGN_OR_RETURN(Value callee, eval(*e.children[0]));
  if (callee.is_undefined()) return undefined_error(callee);
  if (!callee.is_callable()) {
    return Status::invalid_argument("'" + std::string(callee.type_name()) +
                                    "' object is not callable");
  }
  CallArgs args;
  KEEL_TRY(eval_args(e, 1, &args));
  return callee.as_callable().fn(args);
}

Result<Value> Interpreter::eval_filter(const Expr& e) {
  KEEL_ASSIGN_OR_RETURN(Value v, eval(*e.children[0]));
  CallArgs args;
  KEEL_TRY(eval_args(e, 1, &args));
  KEEL_ASSIGN_OR_RETURN(Value r, apply_filter(e.name, v, args, ctx_));
  return taint_new_strings(std::move(r), {&v}, &args);
}

Result<Value> Interpreter::eval_test(const Expr& e) {
  KEEL_ASSIGN_OR_RETURN(Value v, eval(*e.children[0]));
  CallArgs args;
  KEEL_TRY(eval_args(e, 1, &args));
  KEEL_ASSIGN_OR_RETURN(bool r, apply_test(e.name, v, args, ctx_));
  return Value(r != e.negated);
}

}  // namespace keel::jinja
