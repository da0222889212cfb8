// StopStringDetector (see stop_strings.h).
#include "engine/stop_strings.h"

#include <utility>

namespace keel::engine {

StopStringDetector::StopStringDetector(const tokenizer::Tokenizer& tokenizer,
                                       std::vector<std::string> stops)
    : decoder_(tokenizer, /*render_special=*/false, tokenizer::DecodePosition::kContinuation),
      matcher_(std::move(stops)) {}

std::optional<int32_t> StopStringDetector::feed(const std::string& text) {
  if (matcher_.matched()) return std::nullopt;
  const tokenizer::StopMatcher::Output out = matcher_.push(text);
  if (!out.match) return std::nullopt;
  return static_cast<int32_t>(*out.match);
}

std::optional<int32_t> StopStringDetector::push(int32_t token) {
  return feed(decoder_.push(token));
}

std::optional<int32_t> StopStringDetector::resume(std::span<const int32_t> tokens) {
  for (int32_t token : tokens) {
    if (std::optional<int32_t> match = push(token)) return match;
  }
  return std::nullopt;
}

std::optional<int32_t> StopStringDetector::finish() { return feed(decoder_.finish()); }

}  // namespace keel::engine
