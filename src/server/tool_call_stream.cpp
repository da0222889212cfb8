// ToolCallStream (see tool_call_stream.h).
#include "server/tool_call_stream.h"

#include <algorithm>

namespace keel::server {
namespace {

constexpr std::string_view kStreamHermesOpen = "<tool_call>";
constexpr std::string_view kStreamHermesClose = "</tool_call>";
constexpr std::string_view kSpaces = " \t\r\n";

std::string_view trim_space(std::string_view s) {
  const size_t b = s.find_first_not_of(kSpaces);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpaces) - b + 1);
}

// How many bytes at the end of `text` may be the start of `marker` (a proper prefix of it).
size_t partial_marker_tail(std::string_view text, std::string_view marker) {
  size_t keep = std::min(text.size(), marker.size() - 1);
  while (keep > 0 && marker.substr(0, keep) != text.substr(text.size() - keep)) --keep;
  return keep;
}

}  // namespace

ToolCallStream::ToolCallStream(ToolFamily family, const ToolRequest* request)
    : family_(family), request_(request) {
  if (request_->forced() && !request_->constrained) state_ = State::kHeld;
}

ToolStreamOutput ToolCallStream::push(std::string_view text) {
  ToolStreamOutput out;
  held_ += text;
  State before = state_;
  do {
    before = state_;
    switch (state_) {
      case State::kText:
        on_text(&out);
        break;
      case State::kPlain:
        out.content += held_;
        held_.clear();
        break;
      case State::kHeld:
        break;
      case State::kCall:
        on_call(&out);
        break;
      case State::kAfterCall:
        on_after_call();
        break;
      case State::kBetween:
        on_between();
        break;
      case State::kArray:
        on_array();
        break;
      case State::kTrailing:
        trailing_ += held_;
        held_.clear();
        break;
    }
  } while (state_ != before);  // a new state may have input left to read
  return out;
}

void ToolCallStream::on_text(ToolStreamOutput* out) {
  if (family_ == ToolFamily::kHermes) {
    const size_t open = held_.find(kStreamHermesOpen);
    if (open == std::string::npos) {
      const size_t keep = partial_marker_tail(held_, kStreamHermesOpen);
      out->content += held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return;
    }
    out->content += held_.substr(0, open);
    if (!request_->constrained) {  // parsed at the end, from the marker
      held_.erase(0, open);
      state_ = State::kHeld;
      return;
    }
    held_.erase(0, open + kStreamHermesOpen.size());
    start_call();
    return;
  }
  const size_t first = held_.find_first_not_of(kSpaces);
  if (first == std::string::npos) return;  // only spaces so far
  const char c = held_[first];
  if (c != '{' && c != '[' && c != '<') {
    state_ = State::kPlain;
    out->content += held_;
    held_.clear();
    return;
  }
  if (c == '<' || !request_->constrained) {  // '<': a textual <|python_tag|> may precede a call
    state_ = State::kHeld;
    return;
  }
  if (c == '[') {
    held_.erase(0, first + 1);
    in_array_ = true;
    state_ = State::kArray;
    return;
  }
  held_.erase(0, first);
  start_call();
}

void ToolCallStream::start_call() {
  scanner_ = ToolCallScanner();
  call_started_ = false;
  call_skipped_ = !request_->parallel && num_calls_ >= 1;
  state_ = State::kCall;
}

void ToolCallStream::emit_call_deltas(ToolStreamOutput* out) {
  if (call_skipped_) {
    (void)scanner_.take_fragment();
    return;
  }
  if (!call_started_ && scanner_.name()) {
    call_started_ = true;
    out->deltas.push_back({.index = num_calls_, .start = true, .name = *scanner_.name()});
  }
  if (!call_started_) return;
  std::string fragment = scanner_.take_fragment();
  if (!fragment.empty()) {
    out->deltas.push_back({.index = num_calls_, .arguments = std::move(fragment)});
  }
}

void ToolCallStream::on_call(ToolStreamOutput* out) {
  held_.erase(0, scanner_.push(held_));
  emit_call_deltas(out);
  if (scanner_.failed()) {  // not a call after all (cannot happen under a tool grammar)
    state_ = State::kTrailing;
    return;
  }
  if (!scanner_.done()) return;
  if (call_started_) ++num_calls_;
  if (family_ == ToolFamily::kHermes) {
    state_ = State::kAfterCall;
  } else {
    state_ = in_array_ ? State::kArray : State::kTrailing;
  }
}

void ToolCallStream::on_after_call() {
  const size_t close = held_.find(kStreamHermesClose);
  if (close == std::string::npos) return;
  held_.erase(0, close + kStreamHermesClose.size());
  state_ = State::kBetween;
}

void ToolCallStream::on_between() {
  const size_t open = held_.find(kStreamHermesOpen);
  if (open == std::string::npos) {
    const size_t keep = partial_marker_tail(held_, kStreamHermesOpen);
    trailing_ += held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return;
  }
  trailing_ += held_.substr(0, open);
  held_.erase(0, open + kStreamHermesOpen.size());
  start_call();
}

void ToolCallStream::on_array() {
  const size_t next = held_.find_first_not_of(" \t\r\n,");
  if (next == std::string::npos) return;
  if (held_[next] == '{') {
    held_.erase(0, next);
    start_call();
    return;
  }
  if (held_[next] == ']') held_.erase(0, next + 1);
  state_ = State::kTrailing;
}

void ToolCallStream::emit_parsed(ParsedToolOutput parsed, ToolStreamOutput* out) {
  out->content += parsed.content;
  for (ToolCall& call : parsed.calls) {
    out->deltas.push_back({.index = num_calls_, .start = true, .name = std::move(call.name)});
    out->deltas.push_back({.index = num_calls_, .arguments = std::move(call.arguments)});
    ++num_calls_;
  }
}

ToolStreamOutput ToolCallStream::finish() {
  ToolStreamOutput out;
  switch (state_) {
    case State::kHeld:
      emit_parsed(parse_tool_output(family_, held_, *request_), &out);
      held_.clear();
      return out;
    case State::kText:
    case State::kPlain:
      out.content.swap(held_);
      return out;
    case State::kCall:  // cut inside a call (max_tokens, a stop string): what was written
      emit_call_deltas(&out);
      if (call_started_) ++num_calls_;
      break;
    case State::kAfterCall:
    case State::kBetween:
    case State::kArray:
    case State::kTrailing:
      trailing_ += held_;
      break;
  }
  held_.clear();
  out.content = std::string(num_calls_ > 0 ? trim_space(trailing_) : std::string_view(trailing_));
  trailing_.clear();
  return out;
}

}  // namespace keel::server
