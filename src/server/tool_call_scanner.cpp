// ToolCallScanner (see tool_call_scanner.h).
#include "server/tool_call_scanner.h"

#include <nlohmann/json.hpp>

namespace keel::server {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The content of a JSON string literal; nullopt when `literal` is not one.
std::optional<std::string> decode_string(const std::string& literal) {
  const nlohmann::json j = nlohmann::json::parse(literal, nullptr, false);
  if (!j.is_string()) return std::nullopt;
  return j.get<std::string>();
}

// `json` without the whitespace outside its strings.
std::string compact(std::string_view json) {
  std::string out;
  bool in_string = false, escape = false;
  for (char c : json) {
    if (in_string) {
      if (escape) {
        escape = false;
      } else if (c == '\\') {
        escape = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (is_space(c)) {
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

void ToolCallScanner::add(char c) {
  value_ += c;
  if (role_ == Role::kArgs) args_ += c;
}

void ToolCallScanner::start_value(char c) {
  if (key_ == "name") {
    role_ = Role::kName;
  } else if ((key_ == "arguments" || key_ == "parameters") && args_kind_ == ValueKind::kNone) {
    role_ = Role::kArgs;
  } else {
    role_ = Role::kOther;
  }
  value_.clear();
  primitive_ = false;
  depth_ = 0;
  ValueKind kind = ValueKind::kOther;
  if (c == '"') {
    in_string_ = true;
    kind = ValueKind::kString;
  } else if (c == '{' || c == '[') {
    depth_ = 1;
    if (c == '{') kind = ValueKind::kObject;
  } else {
    primitive_ = true;
  }
  if (role_ == Role::kArgs) args_kind_ = kind;
  add(c);
  phase_ = Phase::kInValue;
}

bool ToolCallScanner::in_value(char c) {
  if (in_string_) {
    add(c);
    if (escape_) {
      escape_ = false;
    } else if (c == '\\') {
      escape_ = true;
    } else if (c == '"') {
      in_string_ = false;
      if (depth_ == 0) end_value();
    }
    return true;
  }
  if (primitive_) {
    if (is_space(c) || c == ',' || c == '}') {
      end_value();
      return false;
    }
    add(c);
    return true;
  }
  if (is_space(c)) return true;  // dropped outside strings
  add(c);
  if (c == '"') {
    in_string_ = true;
  } else if (c == '{' || c == '[') {
    ++depth_;
  } else if ((c == '}' || c == ']') && --depth_ == 0) {
    end_value();
  }
  return true;
}

void ToolCallScanner::end_value() {
  if (role_ == Role::kName) name_ = decode_string(value_);
  if (role_ == Role::kArgs) {
    args_closed_ = true;
    if (args_ == "null") args_kind_ = ValueKind::kNone;
  }
  role_ = Role::kOther;
  phase_ = Phase::kAfterValue;
}

bool ToolCallScanner::push(char c) {
  if (done_ || failed_) return false;
  if (phase_ == Phase::kInValue && in_value(c)) return true;
  if (phase_ == Phase::kKey && in_string_) {
    if (escape_) {
      escape_ = false;
    } else if (c == '\\') {
      escape_ = true;
    } else if (c == '"') {
      in_string_ = false;
      phase_ = Phase::kColon;
      return true;
    }
    key_ += c;
    return true;
  }
  if (is_space(c)) return true;
  switch (phase_) {
    case Phase::kStart:
      if (c == '{') {
        phase_ = Phase::kKey;
      } else {
        failed_ = true;
      }
      break;
    case Phase::kKey:
      if (c == '}') {
        done_ = true;
      } else if (c == '"') {
        key_.clear();
        in_string_ = true;
      } else {
        failed_ = true;
      }
      break;
    case Phase::kColon:
      if (c == ':') {
        phase_ = Phase::kValue;
      } else {
        failed_ = true;
      }
      break;
    case Phase::kValue:
      start_value(c);
      break;
    case Phase::kInValue:  // a primitive's terminator: read as after the value
    case Phase::kAfterValue:
      if (c == ',') {
        phase_ = Phase::kKey;
      } else if (c == '}') {
        done_ = true;
      } else {
        failed_ = true;
      }
      break;
  }
  return !failed_;
}

size_t ToolCallScanner::push(std::string_view text) {
  size_t n = 0;
  while (n < text.size() && !done_ && push(text[n])) ++n;
  return n;
}

std::string ToolCallScanner::take_fragment() {
  if (args_kind_ == ValueKind::kObject) {
    std::string out = args_.substr(taken_);
    taken_ = args_.size();
    return out;
  }
  if (!done_ || final_taken_) return {};
  final_taken_ = true;
  return arguments();
}

std::string ToolCallScanner::arguments() const {
  switch (args_kind_) {
    case ValueKind::kNone:
      return "{}";
    case ValueKind::kString:
      return compact(decode_string(args_).value_or(args_));
    case ValueKind::kObject:
    case ValueKind::kOther:
      return args_;
  }
  return args_;
}

}  // namespace keel::server
