// StreamTracker: SSE decoding + chunk classification + vLLM's timing rules, see the header.
#include "loadgen/stream_tracker.h"

#include <utility>

#include "loadgen/stream_chunk.h"

namespace keel::loadgen {

StreamTracker::StreamTracker(double send_s, bool chat, bool keep_text)
    : send_s_(send_s), chat_(chat), keep_text_(keep_text) {}

void StreamTracker::on_bytes(std::string_view bytes, double now_s) {
  if (finished()) return;
  events_.clear();
  Status st = decoder_.feed(bytes, &events_);
  for (const SseEvent& ev : events_) {
    if (finished()) break;
    on_event(ev, now_s);
  }
  if (!st.ok()) fail(st.message());
}

void StreamTracker::on_end_of_body(double now_s) {
  if (ended_) return;
  ended_ = true;
  if (!finished()) {
    events_.clear();
    decoder_.finish(&events_);
    for (const SseEvent& ev : events_) {
      if (finished()) break;
      on_event(ev, now_s);
    }
  }
  if (finished()) return;
  if (num_events_ == 0) {
    fail("the response body held no SSE data events (is streaming supported?)");
  } else {
    fail("stream ended before [DONE] after " + std::to_string(num_content_) + " content chunks");
  }
}

void StreamTracker::fail(std::string reason) {
  if (failed_ || done_ || cancelled_) return;
  failed_ = true;
  error_ = std::move(reason);
}

void StreamTracker::cancel() {
  if (failed_ || done_) return;
  cancelled_ = true;
}

void StreamTracker::on_event(const SseEvent& ev, double now_s) {
  ++num_events_;
  auto chunk = parse_stream_chunk(ev.data);
  if (!chunk.ok()) {
    fail(chunk.error().message());
    return;
  }
  if (ev.event == "error") {
    fail("server sent an error event: " + ev.data.substr(0, 200));
    return;
  }
  if (chunk->completion_tokens) completion_tokens_ = chunk->completion_tokens;
  if (chunk->prompt_tokens) prompt_tokens_ = chunk->prompt_tokens;
  switch (chunk->kind) {
    case ChunkKind::kContent:
      if (num_content_ == 0) {
        first_s_ = now_s;
      } else {
        itl_s_.push_back(now_s - last_s_);
      }
      last_s_ = now_s;
      ++num_content_;
      if (keep_text_) text_ += chunk->text;
      break;
    case ChunkKind::kNoChoices:
      if (chat_ && num_content_ > 0) last_s_ = now_s;
      break;
    case ChunkKind::kDone:
      done_ = true;
      break;
    case ChunkKind::kError:
      fail("server error mid-stream: " + chunk->error_message);
      break;
  }
}

void StreamTracker::fill(RequestRecord* rec) {
  rec->start_s = send_s_;
  rec->num_content_chunks = num_content_;
  rec->usage_completion_tokens = completion_tokens_;
  rec->usage_prompt_tokens = prompt_tokens_;
  rec->ttft_s = num_content_ > 0 ? first_s_ - send_s_ : 0.0;
  rec->latency_s = num_content_ > 0 ? last_s_ - send_s_ : 0.0;
  rec->itl_s = std::move(itl_s_);
  rec->generated_text = std::move(text_);
  rec->cancelled = false;
  if (failed_) {
    rec->success = false;
    rec->error = error_;
  } else if (cancelled_) {
    rec->success = false;
    rec->cancelled = true;
    rec->error.clear();
  } else if (!done_) {
    rec->success = false;
    rec->error = "stream not finished";
  } else if (num_content_ == 0) {
    rec->success = false;
    rec->error = "never received a chunk with non-empty choices (no TTFT)";
  } else {
    rec->success = true;
    rec->error.clear();
  }
}

}  // namespace keel::loadgen
