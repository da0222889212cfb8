// KvTransferFrame encoding (see kv_transfer_frame.h for the layout).
#include "cluster/transfer/kv_transfer_frame.h"

#include "cluster/transfer/frame_bytes.h"

#include <xxhash.h>

#include <cstring>
#include <string>

namespace keel::cluster {
namespace {

constexpr size_t kChecksummedBytes = kKvFrameHeaderBytes - 8;  // the header checksum covers these

using frame_bytes::get_hash;
using frame_bytes::get_le;
using frame_bytes::put_hash;
void put_u16(std::byte* p, uint16_t v) { frame_bytes::put_le(p, v, 2); }
void put_u32(std::byte* p, uint32_t v) { frame_bytes::put_le(p, v, 4); }
void put_u64(std::byte* p, uint64_t v) { frame_bytes::put_le(p, v, 8); }

// Field offsets.
constexpr size_t kMagic = 0, kVersion = 4, kFlags = 6, kIdentity = 8, kHash = 24, kParent = 40,
                 kTokens = 56, kReserved = 60, kLength = 64, kPayloadSum = 72, kHeaderSum = 80;

}  // namespace

uint64_t frame_payload_checksum(std::span<const std::byte> payload) {
  return XXH3_64bits(payload.data(), payload.size());
}

KvFrameHeader make_frame_header(const kv::BlockHash& kv_identity, const kv::BlockHash& block_hash,
                                const kv::BlockHash& parent_hash, uint32_t num_tokens,
                                std::span<const std::byte> payload) {
  KvFrameHeader h;
  h.kv_identity = kv_identity;
  h.block_hash = block_hash;
  h.parent_hash = parent_hash;
  h.num_tokens = num_tokens;
  h.payload_bytes = payload.size();
  h.payload_checksum = frame_payload_checksum(payload);
  return h;
}

KvFrameHeaderBytes encode_frame_header(const KvFrameHeader& h) {
  KvFrameHeaderBytes out{};
  std::byte* p = out.data();
  put_u32(p + kMagic, kKvFrameMagic);
  put_u16(p + kVersion, kKvFrameVersion);
  put_u16(p + kFlags, 0);
  put_hash(p + kIdentity, h.kv_identity);
  put_hash(p + kHash, h.block_hash);
  put_hash(p + kParent, h.parent_hash);
  put_u32(p + kTokens, h.num_tokens);
  put_u32(p + kReserved, 0);
  put_u64(p + kLength, h.payload_bytes);
  put_u64(p + kPayloadSum, h.payload_checksum);
  put_u64(p + kHeaderSum, XXH3_64bits(p, kChecksummedBytes));
  return out;
}

Result<KvFrameHeader> decode_frame_header(std::span<const std::byte> bytes) {
  if (bytes.size() != kKvFrameHeaderBytes) {
    return Status::invalid_argument("kv frame header: " + std::to_string(bytes.size()) +
                                    " bytes, expected " + std::to_string(kKvFrameHeaderBytes));
  }
  const std::byte* p = bytes.data();
  if (get_le(p + kMagic, 4) != kKvFrameMagic) {
    return Status::invalid_argument("kv frame header: bad magic");
  }
  if (get_le(p + kVersion, 2) != kKvFrameVersion) {
    return Status::invalid_argument("kv frame header: unsupported version " +
                                    std::to_string(get_le(p + kVersion, 2)));
  }
  const uint64_t flags = get_le(p + kFlags, 2);
  if (flags != 0 || get_le(p + kReserved, 4) != 0) {
    return Status::invalid_argument("kv frame header: nonzero flags or reserved field");
  }
  if (get_le(p + kHeaderSum, 8) != XXH3_64bits(p, kChecksummedBytes)) {
    return Status::invalid_argument("kv frame header: header checksum mismatch");
  }
  KvFrameHeader h;
  h.kv_identity = get_hash(p + kIdentity);
  h.block_hash = get_hash(p + kHash);
  h.parent_hash = get_hash(p + kParent);
  h.num_tokens = static_cast<uint32_t>(get_le(p + kTokens, 4));
  h.payload_bytes = get_le(p + kLength, 8);
  h.payload_checksum = get_le(p + kPayloadSum, 8);
  if (h.num_tokens == 0 || h.num_tokens > kKvFrameMaxTokens) {
    return Status::invalid_argument("kv frame header: token count " + std::to_string(h.num_tokens) +
                                    " out of range");
  }
  if (h.payload_bytes > kKvFrameMaxPayloadBytes) {
    return Status::invalid_argument("kv frame header: payload of " +
                                    std::to_string(h.payload_bytes) + " bytes exceeds the limit");
  }
  return h;
}

Status check_frame_payload(const KvFrameHeader& header, std::span<const std::byte> payload) {
  if (payload.size() != header.payload_bytes) {
    return Status::corrupt("kv frame: payload of " + std::to_string(payload.size()) +
                           " bytes, header says " + std::to_string(header.payload_bytes));
  }
  if (frame_payload_checksum(payload) != header.payload_checksum) {
    return Status::corrupt("kv frame: payload checksum mismatch");
  }
  return Status::ok_status();
}

std::vector<std::byte> encode_frame(const KvFrameHeader& header,
                                    std::span<const std::byte> payload) {
  const KvFrameHeaderBytes h = encode_frame_header(header);
  std::vector<std::byte> out(kKvFrameHeaderBytes + payload.size());
  std::memcpy(out.data(), h.data(), h.size());
  if (!payload.empty()) std::memcpy(out.data() + h.size(), payload.data(), payload.size());
  return out;
}

Result<KvFrameView> decode_frame(std::span<const std::byte> bytes) {
  if (bytes.size() < kKvFrameHeaderBytes) {
    return Status::invalid_argument("kv frame: shorter than its header");
  }
  KEEL_ASSIGN_OR_RETURN(KvFrameHeader header,
                        decode_frame_header(bytes.first(kKvFrameHeaderBytes)));
  const std::span<const std::byte> payload = bytes.subspan(kKvFrameHeaderBytes);
  if (payload.size() != header.payload_bytes) {
    return Status::invalid_argument("kv frame: " + std::to_string(payload.size()) +
                                    " payload bytes, header says " +
                                    std::to_string(header.payload_bytes));
  }
  KEEL_TRY(check_frame_payload(header, payload));
  return KvFrameView{header, payload};
}

}  // namespace keel::cluster
