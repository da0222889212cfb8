// libFuzzer target for the KV transfer frame codec (src/cluster/transfer/kv_transfer_frame.h):
// arbitrary bytes through decode_frame and decode_frame_header, and through the batch frame's
// decoders (kv_batch_frame.h: decode_batch_frame, decode_batch_header). A decoder must return a
// value or InvalidArgument (Corrupt for a payload failing its checksum) — no crash, no sanitizer
// report — and whatever decodes must re-encode to the same bytes, so a frame that crossed the wire
// once crosses it again unchanged.
//
// Built by the fuzz preset (tests/fuzz/CMakeLists.txt); seeds in corpus/kv_transfer_frame_fuzz/.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "cluster/transfer/kv_batch_frame.h"
#include "cluster/transfer/kv_transfer_frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace cl = keel::cluster;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto frame = cl::decode_frame(bytes);
  if (frame.ok()) {
    const auto again = cl::encode_frame(frame->header, frame->payload);
    if (again.size() != size || std::memcmp(again.data(), data, size) != 0) __builtin_trap();
  } else if (frame.error().code() != keel::StatusCode::kInvalidArgument &&
             frame.error().code() != keel::StatusCode::kCorrupt) {
    __builtin_trap();
  }
  if (size >= cl::kKvFrameHeaderBytes) {
    auto header = cl::decode_frame_header(bytes.first(cl::kKvFrameHeaderBytes));
    if (header.ok()) {
      const auto again = cl::encode_frame_header(*header);
      if (std::memcmp(again.data(), data, again.size()) != 0) __builtin_trap();
      (void)cl::check_frame_payload(*header, bytes.subspan(cl::kKvFrameHeaderBytes));
    } else if (header.error().code() != keel::StatusCode::kInvalidArgument) {
      __builtin_trap();
    }
  }
  auto batch = cl::decode_batch_frame(bytes);
  if (batch.ok()) {
    const std::vector<std::span<const std::byte>> payloads(batch->payloads.begin(),
                                                           batch->payloads.end());
    const auto again = cl::encode_batch_frame(batch->header, payloads);
    if (again.size() != size || std::memcmp(again.data(), data, size) != 0) __builtin_trap();
  } else if (batch.error().code() != keel::StatusCode::kInvalidArgument &&
             batch.error().code() != keel::StatusCode::kCorrupt) {
    __builtin_trap();
  }
  auto batch_header = cl::decode_batch_header(bytes);
  if (batch_header.ok()) {
    const auto again = cl::encode_batch_header(*batch_header);
    if (again.size() != size || std::memcmp(again.data(), data, size) != 0) __builtin_trap();
  } else if (batch_header.error().code() != keel::StatusCode::kInvalidArgument) {
    __builtin_trap();
  }
  return 0;
}
