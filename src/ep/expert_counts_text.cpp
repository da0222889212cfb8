// parse_expert_counts: a small reader of Prometheus text lines for one metric's series.
#include "ep/expert_counts_text.h"

#include <charconv>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

namespace keel::ep {
namespace {

constexpr std::string_view kMetric = "keel:moe_expert_tokens_total";
constexpr int64_t kMaxIndex = 65535;

std::optional<int64_t> parse_count(std::string_view s) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

// The labels between the braces: key="value" pairs, values with \" \\ \n escapes. nullopt when
// malformed; `rest` is left after the closing brace.
std::optional<std::map<std::string, std::string>> parse_labels(std::string_view& rest) {
  std::map<std::string, std::string> labels;
  for (;;) {
    if (rest.starts_with("}")) {
      rest.remove_prefix(1);
      return labels;
    }
    const size_t eq = rest.find("=\"");
    if (eq == std::string_view::npos || eq == 0) return std::nullopt;
    std::string key(rest.substr(0, eq)), value;
    rest.remove_prefix(eq + 2);
    size_t i = 0;
    for (; i < rest.size() && rest[i] != '"'; ++i) {
      if (rest[i] == '\\' && i + 1 < rest.size()) ++i;
      value.push_back(rest[i]);
    }
    if (i == rest.size()) return std::nullopt;
    rest.remove_prefix(i + 1);
    labels[std::move(key)] = std::move(value);
    if (rest.starts_with(",")) rest.remove_prefix(1);
  }
}

// A trailing sample value: "1234" or "1234 <timestamp>"; Prometheus may print an integer count as
// "1234" or "1.234e+03" — only plain integers are accepted (keel prints them so).
std::optional<int64_t> sample_value(std::string_view rest) {
  while (rest.starts_with(" ")) rest.remove_prefix(1);
  const size_t sp = rest.find(' ');
  return parse_count(rest.substr(0, sp));
}

}  // namespace

Result<ExpertCountsGrid> parse_expert_counts(std::string_view text) {
  std::map<std::pair<int64_t, int64_t>, int64_t> cells;
  int64_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.starts_with(kMetric) || line.size() == kMetric.size() ||
        line[kMetric.size()] != '{') {
      continue;
    }
    std::string_view rest = line.substr(kMetric.size() + 1);
    const auto bad = [&](const std::string& why) {
      return Status::corrupt("expert counts, line " + std::to_string(line_no) + ": " + why);
    };
    const auto labels = parse_labels(rest);
    if (!labels) return bad("malformed labels");
    const auto layer_it = labels->find("layer");
    const auto expert_it = labels->find("expert");
    if (layer_it == labels->end() || expert_it == labels->end()) {
      return bad("the series has no layer or expert label");
    }
    const std::optional<int64_t> layer = parse_count(layer_it->second);
    const std::optional<int64_t> expert = parse_count(expert_it->second);
    const std::optional<int64_t> value = sample_value(rest);
    if (!layer || !expert || *layer > kMaxIndex || *expert > kMaxIndex) {
      return bad("layer and expert must be integers in [0, 65535]");
    }
    if (!value) return bad("the value is not a non-negative integer");
    cells[{*layer, *expert}] += *value;
  }
  if (cells.empty()) {
    return Status::invalid_argument(std::string("expert counts: no ") + std::string(kMetric) +
                                    " series found");
  }
  ExpertCountsGrid g;
  for (const auto& [key, v] : cells) {
    g.n_layer = std::max(g.n_layer, key.first + 1);
    g.n_expert = std::max(g.n_expert, key.second + 1);
  }
  g.counts.assign(static_cast<size_t>(g.n_layer * g.n_expert), 0);
  for (const auto& [key, v] : cells) {
    g.counts[static_cast<size_t>(key.first * g.n_expert + key.second)] = v;
  }
  return g;
}

Result<ExpertCountsGrid> read_expert_counts(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found("expert counts file '" + path + "' cannot be read");
  std::ostringstream ss;
  ss << in.rdbuf();
  auto g = parse_expert_counts(ss.str());
  if (!g.ok()) return g.error().with_prefix(path);
  return g;
}

}  // namespace keel::ep
