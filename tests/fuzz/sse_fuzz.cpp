// libFuzzer target: the SSE decoder of keel bench-serve (loadgen/sse_decoder.h) and the parser of
// each event's payload (loadgen/stream_chunk.h) on a stream from an untrusted server. Input: the
// stream's bytes. Check: decoding is independent of how the bytes are cut — the whole input in
// one feed() gives the same events as the input fed in pieces of 1 to 16 bytes (cut points drawn
// from the input itself); the chunk and error-body parsers never crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "loadgen/sse_decoder.h"
#include "loadgen/stream_chunk.h"

namespace {

using keel::loadgen::SseDecoder;
using keel::loadgen::SseEvent;

bool same(const std::vector<SseEvent>& a, const std::vector<SseEvent>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].event != b[i].event || a[i].data != b[i].data) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<SseEvent> whole;
  SseDecoder one;
  if (!one.feed(input, &whole).ok()) std::abort();  // inputs stay far below kMaxEventBytes
  one.finish(&whole);

  std::vector<SseEvent> pieces;
  SseDecoder split;
  uint32_t state = 0x9e3779b9u ^ static_cast<uint32_t>(size);
  for (size_t pos = 0; pos < input.size();) {
    state = state * 1664525u + 1013904223u + static_cast<uint8_t>(input[pos]);
    const size_t n = 1 + (state >> 28);
    if (!split.feed(input.substr(pos, n), &pieces).ok()) std::abort();
    pos += n;
  }
  split.finish(&pieces);
  if (!same(whole, pieces)) std::abort();

  for (const SseEvent& e : whole) (void)keel::loadgen::parse_stream_chunk(e.data);
  (void)keel::loadgen::error_message_from_body(input);
  return 0;
}
