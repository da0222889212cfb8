// StopStringDetector: the engine's finish rule for GenerationRequest::stop_strings. It renders a
// request's generated tokens exactly as the server renders them for the client — incremental
// detokenization (IncrementalDecoder: generated text continues the prompt, so its first piece
// keeps its space; special tokens render as nothing) — and runs a StopMatcher over that text, so
// the engine finishes the request (FinishReason::kStop, TokenEvent::stop_string) on the token that
// completes a stop string, and the server, running the same matcher over the same text, cuts
// the text exactly there. The first stop string to complete wins (tokenizer/stop_matcher.h).
//
// Thread safety: one owner (the engine thread). The tokenizer is a shared immutable handle.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/incremental_decoder.h"
#include "tokenizer/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace keel::engine {

class StopStringDetector {
 public:
  // `stops`: the request's stop strings (empty ones never match).
  StopStringDetector(const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stops);

  // Feeds one generated token; the index (into `stops`) of the stop string this token completes.
  // After a match every later call returns nullopt.
  std::optional<int32_t> push(int32_t token);
  // Feeds the tokens an earlier attempt of the request generated (GenerationRequest::
  // resumed_tokens), before any push(): the text continues from them as in the uninterrupted run
  // (held-back bytes and partial stop strings carry over the boundary). The index of a stop
  // string completed inside them — the earlier attempt would have finished there, so the engine
  // refuses such a request; nullopt normally.
  std::optional<int32_t> resume(std::span<const int32_t> tokens);
  // The request ends for another reason (end of generation, length): flushes the bytes the
  // decoder still holds; the index of a stop string they complete.
  std::optional<int32_t> finish();

 private:
  std::optional<int32_t> feed(const std::string& text);

  tokenizer::IncrementalDecoder decoder_;
  tokenizer::StopMatcher matcher_;
};

}  // namespace keel::engine
