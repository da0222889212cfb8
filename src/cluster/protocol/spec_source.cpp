// read_te_spec / read_je_spec; see spec_source.h.
#include "cluster/protocol/spec_source.h"

#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace keel::cluster {
namespace {

std::string source_name(const std::string& source) { return source == "-" ? "stdin" : source; }

Result<std::string> read_text(const std::string& source) {
  std::string text;
  if (source == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream in(source);
    if (!in) return Status::not_found("--spec " + source + ": cannot open the file");
    std::ostringstream all;
    all << in.rdbuf();
    text = all.str();
  }
  if (text.empty()) return Status::invalid_argument("--spec: " + source_name(source) + " is empty");
  return text;
}

template <typename Spec, typename Parse>
Result<Spec> read_spec(const std::string& source, Parse parse) {
  KEEL_ASSIGN_OR_RETURN(std::string text, read_text(source));
  Result<Spec> spec = parse(text);
  if (!spec.ok()) return spec.status().with_prefix("--spec " + source_name(source));
  return spec;
}

}  // namespace

Result<TeSpec> read_te_spec(const std::string& source) {
  return read_spec<TeSpec>(source, [](std::string_view t) { return parse_te_spec(t); });
}

Result<JeSpec> read_je_spec(const std::string& source) {
  return read_spec<JeSpec>(source, [](std::string_view t) { return parse_je_spec(t); });
}

}  // namespace keel::cluster
