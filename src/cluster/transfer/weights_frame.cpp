// WeightsFrame encoding (see weights_frame.h for the layout).
#include "cluster/transfer/weights_frame.h"

#include <xxhash.h>

#include <string>

#include "cluster/transfer/frame_bytes.h"

namespace keel::cluster {
namespace {

using frame_bytes::get_hash;
using frame_bytes::get_le;
using frame_bytes::put_hash;
using frame_bytes::put_le;

// Field offsets.
constexpr size_t kWtMagic = 0, kWtVersion = 4, kWtReserved = 6, kWtIdentity = 8, kWtOffset = 24,
                 kWtEntryBytes = 32, kWtEntryHash = 40, kWtStream = 48, kWtLength = 56,
                 kWtPayloadSum = 64, kWtHeaderSum = 72;
constexpr size_t kWtChecksummedBytes = kWeightsFrameHeaderBytes - 8;

}  // namespace

WeightsFrameHeaderBytes encode_weights_header(const WeightsFrameHeader& h) {
  WeightsFrameHeaderBytes out{};
  std::byte* p = out.data();
  put_le(p + kWtMagic, kWeightsFrameMagic, 4);
  put_le(p + kWtVersion, kWeightsFrameVersion, 2);
  put_le(p + kWtReserved, 0, 2);
  put_hash(p + kWtIdentity, h.stream_identity);
  put_le(p + kWtOffset, h.offset, 8);
  put_le(p + kWtEntryBytes, h.entry_bytes, 8);
  put_le(p + kWtEntryHash, h.entry_hash, 8);
  put_le(p + kWtStream, h.stream_id, 8);
  put_le(p + kWtLength, h.payload_bytes, 8);
  put_le(p + kWtPayloadSum, h.payload_checksum, 8);
  put_le(p + kWtHeaderSum, XXH3_64bits(p, kWtChecksummedBytes), 8);
  return out;
}

Result<WeightsFrameHeader> decode_weights_header(std::span<const std::byte> bytes) {
  if (bytes.size() != kWeightsFrameHeaderBytes) {
    return Status::invalid_argument("weights frame header: " + std::to_string(bytes.size()) +
                                    " bytes, expected " + std::to_string(kWeightsFrameHeaderBytes));
  }
  const std::byte* p = bytes.data();
  if (get_le(p + kWtMagic, 4) != kWeightsFrameMagic) {
    return Status::invalid_argument("weights frame header: bad magic");
  }
  if (get_le(p + kWtVersion, 2) != kWeightsFrameVersion) {
    return Status::invalid_argument("weights frame header: unsupported version " +
                                    std::to_string(get_le(p + kWtVersion, 2)));
  }
  if (get_le(p + kWtReserved, 2) != 0) {
    return Status::invalid_argument("weights frame header: nonzero reserved field");
  }
  if (get_le(p + kWtHeaderSum, 8) != XXH3_64bits(p, kWtChecksummedBytes)) {
    return Status::invalid_argument("weights frame header: header checksum mismatch");
  }
  WeightsFrameHeader h;
  h.stream_identity = get_hash(p + kWtIdentity);
  h.offset = get_le(p + kWtOffset, 8);
  h.entry_bytes = get_le(p + kWtEntryBytes, 8);
  h.entry_hash = get_le(p + kWtEntryHash, 8);
  h.stream_id = get_le(p + kWtStream, 8);
  h.payload_bytes = get_le(p + kWtLength, 8);
  h.payload_checksum = get_le(p + kWtPayloadSum, 8);
  if (h.payload_bytes > kWeightsFrameMaxPayloadBytes) {
    return Status::invalid_argument("weights frame header: chunk of " +
                                    std::to_string(h.payload_bytes) + " bytes exceeds the limit");
  }
  if (h.offset > h.entry_bytes || h.payload_bytes > h.entry_bytes - h.offset) {
    return Status::invalid_argument("weights frame header: chunk outside its entry");
  }
  return h;
}

Status check_weights_payload(const WeightsFrameHeader& header, std::span<const std::byte> payload) {
  if (payload.size() != header.payload_bytes) {
    return Status::corrupt("weights frame: payload of " + std::to_string(payload.size()) +
                           " bytes, header says " + std::to_string(header.payload_bytes));
  }
  if (XXH3_64bits(payload.data(), payload.size()) != header.payload_checksum) {
    return Status::corrupt("weights frame: payload checksum mismatch");
  }
  return Status::ok_status();
}

}  // namespace keel::cluster
