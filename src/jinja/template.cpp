// Template: parse once, render many times (see template.h).
#include "jinja/template.h"

namespace keel::jinja {

Result<Template> Template::parse(std::string_view source, const ParseOptions& options) {
  KEEL_ASSIGN_OR_RETURN(NodeList nodes, parse_template(source, options));
  return Template(std::make_shared<const NodeList>(std::move(nodes)));
}

Result<std::string> Template::render(const Dict& variables, const RenderEnv& env) const {
  KEEL_ASSIGN_OR_RETURN(TrackedText out, render_tracked(variables, env));
  return std::move(out.text);
}

Result<TrackedText> Template::render_tracked(const Dict& variables, const RenderEnv& env) const {
  Interpreter interpreter(env, variables);
  return interpreter.render(*root_);
}

}  // namespace keel::jinja
