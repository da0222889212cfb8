// libFuzzer target for the engine's wire codec (src/engine/wire.h): arbitrary bytes through every
// decoder. A decoder must return a value or InvalidArgument — no crash, no sanitizer report, no
// unbounded recursion — and whatever decodes must re-encode to a fixed point
// (encode(decode(encode(x))) == encode(x)), so a value that crossed the wire once crosses it again
// unchanged.
//
// Built by the fuzz preset (tests/fuzz/CMakeLists.txt); seeds in corpus/wire_fuzz/ (one message of
// each type).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/wire.h"

namespace {

using keel::engine::wire::Bytes;

template <typename T, typename Decode>
void check_fixed_point(std::span<const uint8_t> data, Decode decode) {
  auto value = decode(data);
  if (!value.ok()) return;
  const Bytes once = keel::engine::wire::encode(*value);
  auto again = decode(std::span<const uint8_t>(once));
  if (!again.ok() || keel::engine::wire::encode(*again) != once) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace wire = keel::engine::wire;
  const std::span<const uint8_t> bytes(data, size);
  (void)wire::peek_type(bytes);
  check_fixed_point<keel::engine::GenerationRequest>(bytes, wire::decode_request);
  check_fixed_point<wire::EventFrame>(bytes, wire::decode_event);
  check_fixed_point<keel::engine::EngineStats>(bytes, wire::decode_stats);
  check_fixed_point<keel::engine::MetricsSnapshot>(bytes, wire::decode_metrics);
  check_fixed_point<std::vector<keel::engine::ContextCacheInfo>>(bytes, wire::decode_caches);
  keel::Status status;
  if (wire::decode_status(bytes, &status).ok()) {
    keel::Status again;
    if (!wire::decode_status(wire::encode(status), &again).ok() ||
        again.to_string() != status.to_string()) {
      __builtin_trap();
    }
  }
  return 0;
}
