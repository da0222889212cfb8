// Template: the public face of keel's Jinja2-subset engine. parse() lexes and parses once;
// render() runs the tree with a set of variables under RenderLimits. Templates are rendered as
// Hugging Face renders chat templates: trim_blocks and lstrip_blocks on, no autoescaping, the
// immutable sandbox (no mutating methods), `tojson` as json.dumps(ensure_ascii=False), and the
// globals raise_exception() and strftime_now().
//
// Supported subset: see docs in chat_template.h's header comment and the unit tests in
// tests/jinja/jinja_test.cpp.
//
// Thread safety: a Template is immutable after parse(); render() may run concurrently from any
// number of threads. Copies share the parsed tree.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/result.h"
#include "jinja/ast.h"
#include "jinja/interpreter.h"
#include "jinja/parser.h"
#include "jinja/value.h"

namespace keel::jinja {

class Template {
 public:
  // Errors: InvalidArgument "line L, column C: ..." for syntax errors; OutOfRange for templates
  // past the lexer's token limit.
  static Result<Template> parse(std::string_view source, const ParseOptions& options = {});

  // Renders with `variables` as the template's global names (they shadow the built-in globals).
  // Errors as Interpreter::render().
  [[nodiscard]] Result<std::string> render(const Dict& variables, const RenderEnv& env = {}) const;
  // The same with the output's plain spans: the bytes that came from variables' strings marked
  // plain (Value::plain), tracked as plain_spans.h describes.
  [[nodiscard]] Result<TrackedText> render_tracked(const Dict& variables,
                                                   const RenderEnv& env = {}) const;

 private:
  explicit Template(std::shared_ptr<const NodeList> root) : root_(std::move(root)) {}
  std::shared_ptr<const NodeList> root_;
};

}  // namespace keel::jinja
