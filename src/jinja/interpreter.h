// Interpreter: renders a parsed template (statement tree) with a set of variables. Scoping
// follows Jinja2: a for loop's body runs in a fresh scope per iteration (so `set` inside a loop
// does not leak out; use namespace()), if-blocks share their enclosing scope, macros see their
// parameters plus the template's top-level names. Undefined names evaluate to an undefined value
// that prints as "", is false, iterates as empty and fails any arithmetic or attribute access.
//
// Bounds (RenderLimits): output size, total work (bytes of strings and list slots created),
// steps (loop iterations plus macro calls), macro call depth and value nesting depth. Exceeding
// one is a ResourceExhausted error; nothing can make a render run unbounded.
//
// Thread safety: an Interpreter is used by one thread for one render.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "jinja/ast.h"
#include "jinja/builtins.h"
#include "jinja/value.h"

namespace keel::jinja {

struct RenderLimits {
  size_t max_output_bytes = size_t{16} << 20;  // the rendered text and any captured block
  uint64_t max_work = uint64_t{256} << 20;     // bytes of strings + 16 per list slot created
  uint64_t max_steps = 1'000'000;              // loop iterations plus macro calls
  int max_call_depth = 16;                     // nested macro calls
  int max_value_depth = 128;                   // nesting of lists/dicts held in variables
  // Nested evaluation (expressions, statements and macro calls together): bounds the stack a
  // render uses, about 3 KiB per level under ASan.
  int max_eval_depth = 400;
};

struct RenderEnv {
  // The clock behind strftime_now() (formatted in UTC); null: the system clock.
  std::function<std::chrono::system_clock::time_point()> now;
  RenderLimits limits;
};

class Interpreter {
 public:
  Interpreter(const RenderEnv& env, const Dict& variables);

  // The rendered text with its plain spans: the bytes that came from strings marked plain in
  // the variables (see plain_spans.h for how they travel).
  // Errors: InvalidArgument "line L, column C: ..." for type errors, undefined values used in
  // arithmetic or attribute access, unknown filters/tests, and raise_exception() ("raised by
  // template: <message>"); ResourceExhausted when a limit is hit.
  Result<TrackedText> render(const NodeList& nodes);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  struct Frame {
    std::unordered_map<std::string, Value> vars;
    bool macro_boundary = false;  // lookups skip from here to the template's top-level frames
  };

  Result<Flow> exec(const NodeList& nodes, TrackedText* out);
  Result<Flow> exec_node(const Node& node, TrackedText* out);
  Result<Flow> exec_node_inner(const Node& node, TrackedText* out);
  Result<Flow> exec_for(const Node& node, TrackedText* out);
  Status exec_set(const Node& node);
  Status bind_targets(const std::vector<std::string>& targets, const Value& value, const Node& at);
  Value make_macro(const Node& node);
  Result<Value> call_macro(const Node& node, CallArgs& args);
  // Appends `text`; `spans` (relative to text) are its plain bytes, or all of it when `all_plain`.
  Status append(TrackedText* out, std::string_view text, const TextSpans* spans = nullptr,
                bool all_plain = false) const;
  // Appends the output of `{{ v }}`.
  Status append_value(TrackedText* out, const Value& v) const;

  Result<Value> eval(const Expr& e);
  Result<Value> eval_inner(const Expr& e);
  Result<Value> eval_binary(const Expr& e);
  Result<Value> eval_compare(const Expr& e);
  Result<Value> eval_call(const Expr& e);
  Result<Value> eval_filter(const Expr& e);
  Result<Value> eval_test(const Expr& e);
  Result<Value> eval_slice(const Expr& e);
  Result<Value> eval_collection(const Expr& e);
  Status eval_args(const Expr& e, size_t first_child, CallArgs* args);
  Result<Value> get_attr(const Value& obj, const std::string& name);
  Result<Value> get_item(const Value& obj, const Value& key);

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value value);
  Status step();
  Status enter();  // counts one level of eval_depth_; pair with --eval_depth_

  const RenderEnv& env_;
  BuiltinContext ctx_;
  std::vector<Frame> frames_;  // [0]: globals and variables, [1]: template top level
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  int eval_depth_ = 0;  // current nesting of eval() and exec_node()
};

// Python binary operators on values: + - * / // % ** (name), with int overflow, division by zero
// and type mismatches reported as InvalidArgument. Results are charged to ctx.
Result<Value> binary_op(std::string_view op, const Value& a, const Value& b, BuiltinContext& ctx);
// Python `needle in haystack` (substring, list membership, dict key); undefined holds nothing.
Result<bool> contains(const Value& haystack, const Value& needle);

}  // namespace keel::jinja
