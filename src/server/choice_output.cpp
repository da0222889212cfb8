// ChoiceOutput (see choice_output.h).
#include "server/choice_output.h"

namespace keel::server {

int64_t count_code_points(std::string_view s) {
  int64_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

ChoiceOutput::ChoiceOutput(const tokenizer::Tokenizer& tokenizer, ChoiceOutputOptions options)
    : tokenizer_(tokenizer),
      // Generated text continues the prompt: its first piece keeps its space.
      decoder_(tokenizer, /*render_special=*/false, tokenizer::DecodePosition::kContinuation),
      matcher_(options.stops),
      stops_(options.stops),
      options_(std::move(options)) {}

LogprobEntry ChoiceOutput::make_entry(const sampling::Logprobs& lp, int64_t offset) const {
  LogprobEntry e;
  e.chosen = {lp.chosen.id, lp.chosen.logprob, tokenizer_.token_to_piece(lp.chosen.id, true)};
  e.top.reserve(lp.top.size());
  for (const sampling::TokenLogprob& t : lp.top) {
    e.top.push_back({t.id, t.logprob, tokenizer_.token_to_piece(t.id, true)});
  }
  e.text_offset = offset;
  return e;
}

void ChoiceOutput::release(ChoiceDelta* delta, std::string text) {
  if (text.empty()) return;
  if (options_.accumulate) text_ += text;
  delta->text += text;
}

void ChoiceOutput::finish(ChoiceDelta* delta, const engine::TokenEvent& event) {
  finished_ = true;
  switch (*event.finish) {
    case engine::FinishReason::kStop:
      finish_reason_ = "stop";
      if (event.stop_string && *event.stop_string >= 0 &&
          static_cast<size_t>(*event.stop_string) < stops_.size()) {
        stop_reason_ = stops_[static_cast<size_t>(*event.stop_string)];
      }
      break;
    case engine::FinishReason::kLength:
      finish_reason_ = "length";
      break;
    case engine::FinishReason::kAbort:
      error_ = "the request was cancelled by the server";
      delta->engine_abort = true;
      break;
    case engine::FinishReason::kError:
      error_ =
          event.error.empty() ? std::string("the engine failed to run the request") : event.error;
      break;
  }
  delta->finish = finish_reason_;
  delta->error = error_;
}

ChoiceDelta ChoiceOutput::consume(engine::TokenEvent event) {
  ChoiceDelta delta;
  if (finished_) return delta;
  if (event.num_prompt_tokens > 0) num_prompt_tokens_ = event.num_prompt_tokens;
  if (event.num_cached_tokens > 0) num_cached_tokens_ = event.num_cached_tokens;
  delta.first_tokens = num_generated_ == 0 && !event.tokens.empty();
  for (size_t i = 0; i < event.tokens.size(); ++i) {
    ++num_generated_;
    std::string piece = decoder_.push(event.tokens[i]);
    if (options_.logprobs && i < event.logprobs.size()) {
      LogprobEntry e =
          make_entry(event.logprobs[i], options_.text_offset_base + decoded_code_points_);
      if (options_.accumulate) logprobs_.push_back(e);
      delta.logprobs.push_back(std::move(e));
    }
    decoded_code_points_ += count_code_points(piece);
    // After a match the matcher releases nothing more: the engine stops on that token.
    release(&delta, matcher_.push(piece).text);
  }
  if (!event.finish) return delta;
  // The engine's finish: what the decoder still holds completes the text (it may complete the
  // stop string the engine matched in it); the held-back tail is released unless a stop string
  // ends the text.
  release(&delta, matcher_.push(decoder_.finish()).text);
  if (!matcher_.matched()) release(&delta, matcher_.flush());
  finish(&delta, event);
  return delta;
}

}  // namespace keel::server
