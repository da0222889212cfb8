// detect_tool_format and make_tool_call_id (see tool_format.h).
#include "server/tool_format.h"

#include <fmt/format.h>

namespace keel::server {
namespace {

bool has(std::string_view text, std::string_view needle) {
  return text.find(needle) != std::string_view::npos;
}

// FNV-1a, 64-bit: ids need spread, not secrecy (the request id already carries a random salt).
uint64_t fnv1a(std::string_view s, uint64_t h = 14695981039346656037ULL) {
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

// SplitMix64's finalizer: a bijection of 64-bit values that spreads every input bit.
uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

ToolFormat detect_tool_format(std::string_view src) {
  ToolFormat f;
  if (has(src, "<tool_call>")) {
    f.family = ToolFamily::kHermes;
  } else if (has(src, "[TOOL_CALLS]")) {
    f.family = ToolFamily::kMistral;
  } else if (has(src, "<|python_tag|>") ||
             (has(src, "<|start_header_id|>") && has(src, "\"parameters\""))) {
    f.family = ToolFamily::kLlama3;
  }
  f.template_renders_tools = f.family != ToolFamily::kGeneric || has(src, "tools");
  return f;
}

std::string_view tool_family_name(ToolFamily family) {
  switch (family) {
    case ToolFamily::kGeneric:
      return "generic";
    case ToolFamily::kHermes:
      return "hermes";
    case ToolFamily::kLlama3:
      return "llama3";
    case ToolFamily::kMistral:
      return "mistral";
  }
  return "generic";
}

std::string make_tool_call_id(ToolFamily family, std::string_view request_id, int32_t choice,
                              size_t call_idx) {
  static constexpr std::string_view kAlphabet =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const size_t len = family == ToolFamily::kMistral ? 9 : 24;
  std::string out = family == ToolFamily::kMistral ? "" : "call_";
  const uint64_t seed = fnv1a(fmt::format("{}/{}/{}", request_id, choice, call_idx));
  uint64_t h = 0;
  for (size_t i = 0; i < len; ++i) {
    // Each block of 8 characters from its own full-width hash of (seed, block): 62^8 < 2^64, so
    // the quotient left after a block is never reused (it can be small, even 0).
    if (i % 8 == 0) h = mix64(seed + i / 8);
    out += kAlphabet[h % kAlphabet.size()];
    h /= kAlphabet.size();
  }
  return out;
}

}  // namespace keel::server
