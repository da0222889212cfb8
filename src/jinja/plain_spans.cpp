// Plain-span propagation helpers (see plain_spans.h).
#include "jinja/plain_spans.h"

#include <algorithm>

namespace keel::jinja {
namespace {

// Deeper than any value a render may hold (RenderLimits::max_value_depth), so nothing escapes.
constexpr int kMaxDepth = 256;

bool holds_plain_at(const Value& v, int depth) {
  if (v.is_string()) return !v.plain_spans().empty();
  if (depth >= kMaxDepth) return false;
  if (v.is_list()) {
    for (const Value& item : v.as_list()) {
      if (holds_plain_at(item, depth + 1)) return true;
    }
  } else if (v.is_dict() || v.is_namespace()) {
    for (const auto& [key, item] : v.as_dict().entries) {
      if (holds_plain_at(item, depth + 1)) return true;
    }
  }
  return false;
}

Value mark_plain_at(const Value& v, int depth) {
  if (v.is_string()) return Value::plain(v.as_string());
  if (depth >= kMaxDepth) return v;
  if (v.is_list()) {
    Value::List out;
    out.reserve(v.as_list().size());
    for (const Value& item : v.as_list()) out.push_back(mark_plain_at(item, depth + 1));
    return Value(std::move(out));
  }
  if (v.is_dict()) {
    Dict out;
    out.entries.reserve(v.as_dict().entries.size());
    for (const auto& [key, item] : v.as_dict().entries) {
      out.entries.emplace_back(key, mark_plain_at(item, depth + 1));
    }
    return Value(std::move(out));
  }
  return v;
}

void collect_strings(const Value& v, int depth, std::vector<const void*>* ids) {
  if (v.is_string()) {
    ids->push_back(v.string_identity());
  } else if (depth < kMaxDepth && v.is_list()) {
    for (const Value& item : v.as_list()) collect_strings(item, depth + 1, ids);
  } else if (depth < kMaxDepth && (v.is_dict() || v.is_namespace())) {
    for (const auto& [key, item] : v.as_dict().entries) collect_strings(item, depth + 1, ids);
  }
}

// True when `result` (a string or lists of them) has a string without spans.
bool has_unspanned_string(const Value& v, int depth) {
  if (v.is_string()) return v.plain_spans().empty() && !v.as_string().empty();
  if (depth < kMaxDepth && v.is_list()) {
    for (const Value& item : v.as_list()) {
      if (has_unspanned_string(item, depth + 1)) return true;
    }
  }
  return false;
}

Value taint_at(const Value& v, const std::vector<const void*>& known, int depth) {
  if (v.is_string()) {
    if (!v.plain_spans().empty() || v.as_string().empty()) return v;
    if (std::binary_search(known.begin(), known.end(), v.string_identity())) return v;
    return Value::plain(v.as_string());
  }
  if (depth < kMaxDepth && v.is_list()) {
    Value::List out;
    out.reserve(v.as_list().size());
    for (const Value& item : v.as_list()) out.push_back(taint_at(item, known, depth + 1));
    return Value(std::move(out));
  }
  return v;
}

}  // namespace

bool holds_plain(const Value& v) { return holds_plain_at(v, 0); }

Value mark_plain(const Value& v) { return mark_plain_at(v, 0); }

Value concat_tracked(const std::vector<Value>& parts) {
  std::string text;
  TextSpans spans;
  for (const Value& part : parts) {
    const size_t offset = text.size();
    if (part.is_string()) {
      text += part.as_string();
      append_spans(&spans, part.plain_spans(), 0, part.as_string().size(), offset);
    } else {
      text += part.to_str();
      if (holds_plain(part)) append_span(&spans, offset, text.size());
    }
  }
  return Value::with_spans(std::move(text), std::move(spans));
}

Value substr_tracked(const Value& s, size_t begin, size_t end) {
  TextSpans spans;
  append_spans(&spans, s.plain_spans(), begin, end, 0);
  return Value::with_spans(s.as_string().substr(begin, end - begin), std::move(spans));
}

Value pick_chars_tracked(const Value& s, const std::vector<size_t>& offsets,
                         const std::vector<size_t>& picked) {
  const std::string& text = s.as_string();
  const TextSpans& plain = s.plain_spans();
  std::string out;
  TextSpans spans;
  for (size_t i : picked) {
    const size_t b = offsets[i], e = offsets[i + 1];
    const size_t at = out.size();
    out.append(text, b, e - b);
    if (!plain.empty() && overlaps(plain, b, e)) append_span(&spans, at, out.size());
  }
  return Value::with_spans(std::move(out), std::move(spans));
}

Value taint_new_strings(Value result, const std::vector<const Value*>& inputs,
                        const CallArgs* args) {
  if (!has_unspanned_string(result, 0)) return result;
  bool plain_input = false;
  for (const Value* v : inputs) plain_input = plain_input || holds_plain(*v);
  if (args != nullptr) {
    for (const Value& v : args->positional) plain_input = plain_input || holds_plain(v);
    for (const auto& [name, v] : args->named) plain_input = plain_input || holds_plain(v);
  }
  if (!plain_input) return result;
  std::vector<const void*> known;
  for (const Value* v : inputs) collect_strings(*v, 0, &known);
  if (args != nullptr) {
    for (const Value& v : args->positional) collect_strings(v, 0, &known);
    for (const auto& [name, v] : args->named) collect_strings(v, 0, &known);
  }
  std::sort(known.begin(), known.end());
  return taint_at(result, known, 0);
}

}  // namespace keel::jinja
