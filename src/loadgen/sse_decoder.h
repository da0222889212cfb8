// SseDecoder: incremental decoder of a `text/event-stream` body (the WHATWG server-sent-events
// format) as OpenAI-compatible servers stream it. Bytes arrive in arbitrary pieces (TCP reads,
// HTTP chunks); complete events come out.
//   - lines end with LF, CRLF or CR; a blank line ends an event
//   - `data:` with or without one following space; several data lines join with '\n'
//   - lines starting with ':' are comments (keep-alive pings) and are dropped
//   - `event:` names are kept; `id:`, `retry:` and unknown fields are ignored
//   - an event with no data line (e.g. only a comment) is not emitted
// finish() flushes an event left unterminated when the stream ends, so a server that omits the
// last blank line loses nothing.
//
// Thread safety: one decoder per stream; not shared.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace keel::loadgen {

struct SseEvent {
  std::string event;  // the `event:` field; "" when absent (= "message")
  std::string data;   // the data lines joined by '\n'
};

class SseDecoder {
 public:
  // Buffered bytes of one unfinished event above this fail the stream (a runaway or non-SSE body).
  static constexpr size_t kMaxEventBytes = size_t{16} << 20;

  // Consumes bytes; appends every event they complete to *out. Fails (and stays failed) when one
  // event grows beyond kMaxEventBytes.
  Status feed(std::string_view bytes, std::vector<SseEvent>* out);

  // End of stream: emits a pending event that lacked its closing blank line.
  void finish(std::vector<SseEvent>* out);

  // Bytes received but not yet part of an emitted event.
  [[nodiscard]] size_t pending_bytes() const { return buf_.size() - pos_ + event_bytes_; }

 private:
  void process_line(std::string_view line, std::vector<SseEvent>* out);
  void dispatch(std::vector<SseEvent>* out);

  std::string buf_;         // unconsumed input; lines are taken from buf_[pos_...]
  size_t pos_ = 0;          // start of the first unconsumed byte in buf_
  SseEvent current_;        // fields of the event being assembled
  bool has_data_ = false;   // current_ saw at least one data line
  size_t event_bytes_ = 0;  // bytes of the lines consumed into current_
  bool failed_ = false;
};

}  // namespace keel::loadgen
