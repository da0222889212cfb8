// ReasoningSplitter and the reasoning parser's rules (see reasoning_split.h).
#include "server/reasoning_split.h"

#include <algorithm>

namespace keel::server {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kThinkSpaces = " \t\r\n";

bool is_think_space(char c) { return kThinkSpaces.find(c) != std::string_view::npos; }

// How many bytes at the end of `text` may be the start of `tag` (a proper prefix of it).
size_t partial_think_tag_tail(std::string_view text, std::string_view tag) {
  size_t keep = std::min(text.size(), tag.size() - 1);
  while (keep > 0 && tag.substr(0, keep) != text.substr(text.size() - keep)) --keep;
  return keep;
}

std::string_view trim_think_right(std::string_view s) {
  while (!s.empty() && is_think_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<ReasoningParser> parse_reasoning_parser(std::string_view name) {
  if (name == "none") return ReasoningParser::kNone;
  if (name == "qwen3") return ReasoningParser::kQwen3;
  if (name == "deepseek-r1") return ReasoningParser::kDeepSeekR1;
  return Status::invalid_argument("reasoning parser \"" + std::string(name) +
                                  "\": expected none, qwen3 or deepseek-r1");
}

std::string_view reasoning_parser_name(ReasoningParser parser) {
  switch (parser) {
    case ReasoningParser::kNone:
      return "none";
    case ReasoningParser::kQwen3:
      return "qwen3";
    case ReasoningParser::kDeepSeekR1:
      return "deepseek-r1";
  }
  return "none";
}

ThinkTail think_tail(const tokenizer::TrackedText& prompt) {
  const size_t from = prompt.plain.empty() ? 0 : prompt.plain.back().end;
  const std::string_view tail = std::string_view(prompt.text).substr(from);
  const size_t open = tail.rfind(kThinkOpen);
  const size_t close = tail.rfind(kThinkClose);
  if (open != std::string_view::npos && (close == std::string_view::npos || close < open)) {
    return ThinkTail::kOpen;
  }
  return close != std::string_view::npos ? ThinkTail::kClosed : ThinkTail::kNone;
}

bool starts_in_reasoning(ReasoningParser parser, ThinkTail tail) {
  switch (parser) {
    case ReasoningParser::kNone:
      return false;
    case ReasoningParser::kQwen3:
      return tail == ThinkTail::kOpen;
    case ReasoningParser::kDeepSeekR1:
      return tail != ThinkTail::kClosed;
  }
  return false;
}

ReasoningSplitter::ReasoningSplitter(bool in_reasoning)
    : state_(in_reasoning ? State::kReasoningStart : State::kStart) {}

ReasoningParts ReasoningSplitter::push(std::string_view text) {
  ReasoningParts out;
  held_ += text;
  State before = state_;
  do {
    before = state_;
    step(&out);
  } while (state_ != before);  // a new state may have input left to read
  return out;
}

void ReasoningSplitter::step(ReasoningParts* out) {
  switch (state_) {
    case State::kStart: {
      const size_t first = held_.find_first_not_of(kThinkSpaces);
      if (first == std::string::npos) return;  // only spaces so far
      const std::string_view rest = std::string_view(held_).substr(first);
      if (rest.starts_with(kThinkOpen)) {
        held_.erase(0, first + kThinkOpen.size());
        open_tag_seen_ = true;
        state_ = State::kReasoningStart;
      } else if (rest.size() < kThinkOpen.size() && kThinkOpen.starts_with(rest)) {
        return;  // may still become <think>
      } else {
        out->content += held_;
        held_.clear();
        state_ = State::kContent;
      }
      return;
    }
    case State::kReasoningStart:
      for (;;) {
        const size_t first = held_.find_first_not_of(kThinkSpaces);
        if (first == std::string::npos) {
          held_.clear();
          return;
        }
        const std::string_view rest = std::string_view(held_).substr(first);
        if (!open_tag_seen_) {
          if (rest.starts_with(kThinkOpen)) {  // the model wrote the tag itself: dropped
            held_.erase(0, first + kThinkOpen.size());
            open_tag_seen_ = true;
            continue;
          }
          if (rest.size() < kThinkOpen.size() && kThinkOpen.starts_with(rest)) return;
        }
        held_.erase(0, first);
        state_ = State::kReasoning;
        return;
      }
    case State::kReasoning: {
      const size_t close = held_.find(kThinkClose);
      if (close != std::string::npos) {
        out->reasoning += trim_think_right(std::string_view(held_).substr(0, close));
        held_.erase(0, close + kThinkClose.size());
        state_ = State::kContentStart;
        return;
      }
      size_t cut = held_.size() - partial_think_tag_tail(held_, kThinkClose);
      while (cut > 0 && is_think_space(held_[cut - 1])) --cut;  // may end the thinking
      out->reasoning.append(held_, 0, cut);
      held_.erase(0, cut);
      return;
    }
    case State::kContentStart: {
      const size_t first = held_.find_first_not_of(kThinkSpaces);
      if (first == std::string::npos) {
        held_.clear();
        return;
      }
      held_.erase(0, first);
      state_ = State::kContent;
      return;
    }
    case State::kContent:
      out->content += held_;
      held_.clear();
      return;
  }
}

ReasoningParts ReasoningSplitter::finish() {
  ReasoningParts out;
  switch (state_) {
    case State::kStart:
      out.content = std::move(held_);
      break;
    case State::kReasoningStart: {  // leading spaces are the thinking's edge
      const size_t first = held_.find_first_not_of(kThinkSpaces);
      if (first != std::string::npos) {
        out.reasoning = trim_think_right(std::string_view(held_).substr(first));
      }
      break;
    }
    case State::kReasoning:  // held spaces followed by text are inside the thinking
      out.reasoning = trim_think_right(held_);
      break;
    case State::kContentStart:
    case State::kContent:
      out.content = std::move(held_);
      break;
  }
  held_.clear();
  state_ = State::kContent;
  return out;
}

ReasoningParts split_reasoning(std::string_view text, bool in_reasoning) {
  ReasoningSplitter s(in_reasoning);
  ReasoningParts out = s.push(text);
  ReasoningParts rest = s.finish();
  out.reasoning += rest.reasoning;
  out.content += rest.content;
  return out;
}

}  // namespace keel::server
