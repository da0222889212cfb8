// SpeculativeParams: how a request speculates (docs/speculative.md) — the drafting method and the
// most tokens drafted per step — and their validation. A plain value in GenerationRequest (the
// request field "speculative") and EngineConfig (the server flags --speculative / --spec-k).
// Invariant of a validated value: 1 ≤ k ≤ kMaxSpecK and 1 ≤ ngram_min ≤ ngram_max ≤
// kMaxSpecNgram (the n-gram bounds are checked whatever the method; the model drafters ignore
// them).
// Thread safety: a plain value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace keel::engine {

inline constexpr int32_t kMaxSpecK = 16;      // drafted tokens per step at most
inline constexpr int32_t kMaxSpecNgram = 16;  // longest n-gram the prompt-lookup drafter matches

enum class SpecMethod {
  kNone,   // autoregressive: one token per step
  kNgram,  // prompt lookup: the tokens that followed an earlier occurrence of the last n tokens
  // the engine's EAGLE-like draft head (draft/draft_head.h) continuing the target's own hidden
  // state; needs an engine with a head loaded (EngineConfig::draft_head_path)
  kDraftHead,
  // a smaller model with the target's vocabulary drafting greedily (draft/draft_model_runner.h);
  // needs an engine with a draft model loaded (EngineConfig::draft_model_path)
  kDraftModel,
};
// "none", "ngram", "draft-head", "draft-model"
std::string_view spec_method_name(SpecMethod m);
// The method named `name`; nullopt for an unknown name.
std::optional<SpecMethod> parse_spec_method(std::string_view name);

struct SpeculativeParams {
  SpecMethod method = SpecMethod::kNone;
  int32_t k = 4;          // tokens drafted per step at most (the step verifies k + 1 positions)
  int32_t ngram_max = 3;  // n-gram lookup: the longest suffix matched first ...
  int32_t ngram_min = 1;  // ... down to this length
  [[nodiscard]] bool enabled() const { return method != SpecMethod::kNone; }
  // InvalidArgument naming the field ("speculative.k", ...) and the value when out of range.
  [[nodiscard]] Status validate() const;
  friend bool operator==(const SpeculativeParams&, const SpeculativeParams&) = default;
};

}  // namespace keel::engine
