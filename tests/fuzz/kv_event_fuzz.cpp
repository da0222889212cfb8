// libFuzzer target for the KV event codec (src/cluster/kv_events/kv_event_codec.h): arbitrary bytes
// through decode_kv_event_batch. It must return a batch or InvalidArgument — no crash, no sanitizer
// report, no unbounded allocation or recursion — and whatever decodes must survive
// decode → encode → decode unchanged, with the encoding a fixed point from then on.
//
// Built by the fuzz preset (tests/fuzz/CMakeLists.txt); seeds in corpus/kv_event_fuzz/ (one batch
// of each event type).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "cluster/kv_events/kv_event_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace cluster = keel::cluster;
  const auto first = cluster::decode_kv_event_batch(std::span<const uint8_t>(data, size));
  if (!first.ok()) {
    if (first.error().code() != keel::StatusCode::kInvalidArgument) __builtin_trap();
    return 0;
  }
  const cluster::Bytes once = cluster::encode_kv_event_batch(*first);
  const auto second = cluster::decode_kv_event_batch(once);
  if (!second.ok()) __builtin_trap();
  // Equal values (a NaN ts never compares equal: its encoding is checked instead) ...
  if (!(*second == *first) && !std::isnan(first->ts)) __builtin_trap();
  // ... and the encoding is a fixed point.
  if (cluster::encode_kv_event_batch(*second) != once) __builtin_trap();
  return 0;
}
