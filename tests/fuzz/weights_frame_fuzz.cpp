// libFuzzer target for the weights frame codec (src/cluster/transfer/weights_frame.h): arbitrary
// bytes through decode_weights_header, and the rest of the input as the payload through
// check_weights_payload. The decoder must return a header or InvalidArgument (the payload check
// OK or Corrupt) — no crash, no sanitizer report — and a decoded header must re-encode to the same
// bytes and describe a chunk inside its entry.
//
// Built by the fuzz preset (tests/fuzz/CMakeLists.txt); seeds in corpus/weights_frame_fuzz/.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "cluster/transfer/weights_frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace cl = keel::cluster;
  if (size < cl::kWeightsFrameHeaderBytes) {
    const auto short_header =
        cl::decode_weights_header({reinterpret_cast<const std::byte*>(data), size});
    if (short_header.ok()) __builtin_trap();
    return 0;
  }
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto header = cl::decode_weights_header(bytes.first(cl::kWeightsFrameHeaderBytes));
  if (!header.ok()) {
    if (header.error().code() != keel::StatusCode::kInvalidArgument) __builtin_trap();
    return 0;
  }
  const auto again = cl::encode_weights_header(*header);
  if (std::memcmp(again.data(), data, again.size()) != 0) __builtin_trap();
  if (header->offset > header->entry_bytes ||
      header->payload_bytes > header->entry_bytes - header->offset ||
      header->payload_bytes > cl::kWeightsFrameMaxPayloadBytes) {
    __builtin_trap();
  }
  const keel::Status s =
      cl::check_weights_payload(*header, bytes.subspan(cl::kWeightsFrameHeaderBytes));
  if (!s.ok() && s.code() != keel::StatusCode::kCorrupt) __builtin_trap();
  return 0;
}
