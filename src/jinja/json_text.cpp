// JSON conversion (see json_text.h).
#include "jinja/json_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace keel::jinja {
namespace {

void append_json_string(const std::string& s, std::string* out) {
  *out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned char>(c));
          *out += buf;
        } else {
          *out += c;
        }
    }
  }
  *out += '"';
}

class JsonWriter {
 public:
  JsonWriter(std::optional<int> indent, bool sort_keys, size_t max_bytes)
      : indent_(indent), sort_keys_(sort_keys), max_bytes_(max_bytes) {}

  Status write(const Value& v, int level) {
    if (overflow_ || out_.size() > max_bytes_) {
      return Status::resource_exhausted("tojson output exceeds " + std::to_string(max_bytes_) +
                                        " bytes");
    }
    switch (v.kind()) {
      case ValueKind::kNone:
        out_ += "null";
        return Status();
      case ValueKind::kBool:
        out_ += v.as_bool() ? "true" : "false";
        return Status();
      case ValueKind::kInt:
        out_ += std::to_string(v.as_int());
        return Status();
      case ValueKind::kFloat: {
        double d = v.as_double();
        if (std::isnan(d))
          out_ += "NaN";
        else if (std::isinf(d))
          out_ += d > 0 ? "Infinity" : "-Infinity";
        else
          out_ += format_python_float(d);
        return Status();
      }
      case ValueKind::kString:
        append_json_string(v.as_string(), &out_);
        return Status();
      case ValueKind::kList:
        return write_list(v.as_list(), level);
      case ValueKind::kDict:
        return write_dict(v.as_dict(), level);
      case ValueKind::kUndefined:
      case ValueKind::kNamespace:
      case ValueKind::kCallable:
        break;
    }
    return Status::invalid_argument("object of type " + std::string(v.type_name()) +
                                    " is not JSON serializable");
  }

  std::string take() { return std::move(out_); }
  [[nodiscard]] bool overflowed() const { return overflow_; }

 private:
  void newline(int level) {
    if (!indent_) return;
    size_t spaces = static_cast<size_t>(std::max(0, *indent_)) * static_cast<size_t>(level);
    if (out_.size() + spaces + 1 > max_bytes_) {
      overflow_ = true;
      return;
    }
    out_ += '\n';
    out_.append(spaces, ' ');
  }
  const char* item_separator() const { return indent_ ? "," : ", "; }

  Status write_list(const Value::List& items, int level) {
    if (items.empty()) {
      out_ += "[]";
      return Status();
    }
    out_ += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out_ += item_separator();
      newline(level + 1);
      KEEL_TRY(write(items[i], level + 1));
    }
    newline(level);
    out_ += ']';
    return Status();
  }

  Status write_dict(const Dict& dict, int level) {
    if (dict.entries.empty()) {
      out_ += "{}";
      return Status();
    }
    std::vector<const std::pair<std::string, Value>*> entries;
    for (const auto& e : dict.entries) entries.push_back(&e);
    if (sort_keys_) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto* a, const auto* b) { return a->first < b->first; });
    }
    out_ += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) out_ += item_separator();
      newline(level + 1);
      append_json_string(entries[i]->first, &out_);
      out_ += ": ";
      KEEL_TRY(write(entries[i]->second, level + 1));
    }
    newline(level);
    out_ += '}';
    return Status();
  }

  std::optional<int> indent_;
  bool sort_keys_;
  size_t max_bytes_;
  bool overflow_ = false;  // an indent would have passed max_bytes_
  std::string out_;
};

template <typename Json>
Result<Value> convert(const Json& j, int depth_left) {
  if (depth_left < 0) return Status::invalid_argument("JSON value nests too deeply");
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      auto u = j.template get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      Value::List items;
      items.reserve(j.size());
      for (const auto& item : j) {
        KEEL_ASSIGN_OR_RETURN(Value v, convert(item, depth_left - 1));
        items.push_back(std::move(v));
      }
      return Value(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Dict dict;
      dict.entries.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        KEEL_ASSIGN_OR_RETURN(Value v, convert(it.value(), depth_left - 1));
        dict.entries.emplace_back(it.key(), std::move(v));
      }
      return Value(std::move(dict));
    }
    case nlohmann::json::value_t::binary:
    case nlohmann::json::value_t::discarded:
      break;
  }
  return Status::invalid_argument("JSON value of this type cannot be used in a template");
}

}  // namespace

Result<std::string> to_json(const Value& v, std::optional<int> indent, bool sort_keys,
                            size_t max_bytes) {
  JsonWriter writer(indent, sort_keys, max_bytes);
  KEEL_TRY(writer.write(v, 0));
  bool overflow = writer.overflowed();
  std::string out = writer.take();
  if (overflow || out.size() > max_bytes) {
    return Status::resource_exhausted("tojson output exceeds " + std::to_string(max_bytes) +
                                      " bytes");
  }
  return out;
}

Result<Value> value_from_json(const nlohmann::ordered_json& j, int max_depth) {
  return convert(j, max_depth);
}

Result<Value> value_from_json(const nlohmann::json& j, int max_depth) {
  return convert(j, max_depth);
}

}  // namespace keel::jinja
