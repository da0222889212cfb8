// SseDecoder: line splitting (LF, CRLF, CR; a CR at the end of the input waits for the next piece
// in case an LF follows) and field handling per the WHATWG event-stream rules.
#include "loadgen/sse_decoder.h"

namespace keel::loadgen {

Status SseDecoder::feed(std::string_view bytes, std::vector<SseEvent>* out) {
  if (failed_) return Status::corrupt("SSE stream already failed");
  buf_.append(bytes);
  for (;;) {
    const size_t eol = buf_.find_first_of("\r\n", pos_);
    if (eol == std::string::npos) break;
    size_t next = eol + 1;
    if (buf_[eol] == '\r') {
      if (eol + 1 == buf_.size()) break;  // a CR at the end: wait to see if LF follows
      if (buf_[eol + 1] == '\n') next = eol + 2;
    }
    process_line(std::string_view(buf_).substr(pos_, eol - pos_), out);
    pos_ = next;
  }
  // Compact once the consumed prefix dominates, so the buffer stays O(one event).
  if (pos_ > 4096 && pos_ * 2 > buf_.size()) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  if (pending_bytes() > kMaxEventBytes) {
    failed_ = true;
    return Status::resource_exhausted("SSE event larger than " +
                                      std::to_string(kMaxEventBytes >> 20) + " MiB");
  }
  return Status();
}

void SseDecoder::finish(std::vector<SseEvent>* out) {
  if (failed_) return;
  if (pos_ < buf_.size()) {
    std::string_view rest = std::string_view(buf_).substr(pos_);
    if (!rest.empty() && rest.back() == '\r') rest.remove_suffix(1);
    process_line(rest, out);
  }
  buf_.clear();
  pos_ = 0;
  dispatch(out);
}

void SseDecoder::process_line(std::string_view line, std::vector<SseEvent>* out) {
  if (line.empty()) {
    dispatch(out);
    return;
  }
  event_bytes_ += line.size() + 1;
  if (line.front() == ':') return;  // comment / keep-alive ping
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) current_.data.push_back('\n');
    current_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    current_.event.assign(value);
  }
}

void SseDecoder::dispatch(std::vector<SseEvent>* out) {
  if (has_data_) out->push_back(std::move(current_));
  current_ = SseEvent();
  has_data_ = false;
  event_bytes_ = 0;
}

}  // namespace keel::loadgen
