// ChoiceOutput: turns one choice's engine TokenEvents into client-visible text on an io thread
// (never the engine thread): incremental detokenization, logprob entries, usage counts, and the
// text side of stop strings — text that may begin a stop string is held back and a stop string is
// never released, across token boundaries and inside multi-byte characters.
//
// Who decides: the engine finishes a request on a stop string (GenerationRequest::stop_strings;
// its final event carries stop_string), as it does on EOS, stop tokens and the length limit, so
// /metrics counts it as `stop`. ChoiceOutput runs the same matcher over the same text only to cut
// the text where the engine stopped; it never ends a choice by itself, and tokens after a match
// (from an engine that did not stop) release no text. finish "stop" covers EOS/stop tokens and
// stop strings; "length" the token limit. An engine error or abort becomes `error`.
//
// Thread safety: one owner (the request's strand).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/types.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace keel::server {

struct TopLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
  std::string text;  // the token's piece (special tokens rendered)
};

struct LogprobEntry {
  TopLogprob chosen;
  std::vector<TopLogprob> top;  // most likely first
  int64_t text_offset = 0;      // code points of the choice's text before this token (+ echo)
};

struct ChoiceDelta {
  std::string text;                    // newly released text
  std::vector<LogprobEntry> logprobs;  // one per consumed token, when logprobs were requested
  bool first_tokens = false;           // this event brought the choice's first generated tokens
  std::optional<std::string> finish;   // "stop" or "length", on the choice's last delta
  std::optional<std::string> error;    // the engine failed or aborted the request
  bool engine_abort = false;           // ... and it was an abort (drain), not a failure

  [[nodiscard]] bool empty() const {
    return text.empty() && logprobs.empty() && !first_tokens && !finish && !error;
  }
};

struct ChoiceOutputOptions {
  std::vector<std::string> stops;
  bool logprobs = false;         // build LogprobEntry values from TokenEvent::logprobs
  bool accumulate = false;       // keep the released text and logprobs (non-streamed responses)
  int64_t text_offset_base = 0;  // code points before the generated text (echoed prompt)
};

class ChoiceOutput {
 public:
  ChoiceOutput(const tokenizer::Tokenizer& tokenizer, ChoiceOutputOptions options);

  ChoiceDelta consume(engine::TokenEvent event);

  [[nodiscard]] bool finished() const { return finished_; }
  [[nodiscard]] int32_t num_generated() const { return num_generated_; }
  [[nodiscard]] int32_t num_prompt_tokens() const { return num_prompt_tokens_; }
  [[nodiscard]] int32_t num_cached_tokens() const { return num_cached_tokens_; }
  // Accumulated output (options.accumulate).
  [[nodiscard]] const std::string& text() const { return text_; }
  [[nodiscard]] const std::vector<LogprobEntry>& logprobs() const { return logprobs_; }
  [[nodiscard]] const std::optional<std::string>& finish_reason() const { return finish_reason_; }
  [[nodiscard]] const std::optional<std::string>& error() const { return error_; }
  // The stop string that ended the choice, if any.
  [[nodiscard]] const std::optional<std::string>& stop_reason() const { return stop_reason_; }

 private:
  LogprobEntry make_entry(const sampling::Logprobs& lp, int64_t offset) const;
  void release(ChoiceDelta* delta, std::string text);
  void finish(ChoiceDelta* delta, const engine::TokenEvent& event);

  tokenizer::Tokenizer tokenizer_;
  tokenizer::IncrementalDecoder decoder_;
  tokenizer::StopMatcher matcher_;
  std::vector<std::string> stops_;
  ChoiceOutputOptions options_;
  bool finished_ = false;
  int32_t num_generated_ = 0;
  int32_t num_prompt_tokens_ = 0;
  int32_t num_cached_tokens_ = 0;
  int64_t decoded_code_points_ = 0;
  std::string text_;
  std::vector<LogprobEntry> logprobs_;
  std::optional<std::string> finish_reason_;
  std::optional<std::string> error_;
  std::optional<std::string> stop_reason_;
};

// Number of UTF-8 code points in `s` (bytes that are not continuation bytes).
int64_t count_code_points(std::string_view s);

}  // namespace keel::server
