// StreamTracker: turns the body bytes of one streamed completion, each piece stamped with its
// arrival time, into a RequestRecord's timings, token counts and outcome. It holds no sockets and
// reads no clock, so the timing rules are unit-tested on synthetic timelines.
//
// Outcome rules: success needs `[DONE]` and at least one content chunk. An `error` payload, a
// payload that is not JSON, a body that ends before `[DONE]`, or a transport error fails the
// request with that reason; bytes after `[DONE]` are ignored.
//
// Thread safety: one tracker per request; not shared.
#pragma once

#include <string>
#include <string_view>

#include "loadgen/request_record.h"
#include "loadgen/sse_decoder.h"

namespace keel::loadgen {

class StreamTracker {
 public:
  // send_s: the request's send time; chat: the endpoint is /v1/chat/completions (the usage chunk
  // then also moves the end time, as vLLM's chat client does); keep_text: keep generated text.
  StreamTracker(double send_s, bool chat, bool keep_text);

  // Body bytes that arrived at now_s.
  void on_bytes(std::string_view bytes, double now_s);
  // The body ended (complete message or connection closed) at now_s.
  void on_end_of_body(double now_s);
  // The transport failed; the first failure reason wins.
  void fail(std::string reason);
  // The client hung up on purpose: the record is cancelled (unless the request failed first).
  void cancel();

  // [DONE] was seen, or the request failed: nothing more is needed from the stream.
  [[nodiscard]] bool finished() const { return done_ || failed_ || cancelled_; }
  [[nodiscard]] bool failed() const { return failed_; }
  [[nodiscard]] bool saw_done() const { return done_; }
  [[nodiscard]] int64_t num_content_chunks() const { return num_content_; }

  // Writes timings, counts, text and outcome into *rec (index, prompt_len, scheduled_s are left
  // to the caller). Call once, after the stream is over.
  void fill(RequestRecord* rec);

 private:
  void on_event(const SseEvent& ev, double now_s);

  SseDecoder decoder_;
  std::vector<SseEvent> events_;  // scratch, reused
  double send_s_;
  bool chat_;
  bool keep_text_;
  bool done_ = false;
  bool failed_ = false;
  bool cancelled_ = false;
  bool ended_ = false;
  std::string error_;
  int64_t num_events_ = 0;
  int64_t num_content_ = 0;
  double first_s_ = 0.0;
  double last_s_ = 0.0;
  std::vector<double> itl_s_;
  std::optional<int64_t> completion_tokens_;
  std::optional<int64_t> prompt_tokens_;
  std::string text_;
};

}  // namespace keel::loadgen
