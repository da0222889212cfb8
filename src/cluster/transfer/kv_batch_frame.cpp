// KvBatchFrame encoding (see kv_batch_frame.h for the layout).
#include "cluster/transfer/kv_batch_frame.h"

#include <xxhash.h>

#include <string>

#include "cluster/transfer/frame_bytes.h"
#include "core/check.h"

namespace keel::cluster {
namespace {

using frame_bytes::get_hash;
using frame_bytes::get_le;
using frame_bytes::put_hash;
using frame_bytes::put_le;

// Field offsets: the fixed part's, then an entry's (from the entry's start). A named namespace:
// the unity build puts the other frames' offsets beside these.
namespace batch_at {
constexpr size_t kMagic = 0, kVersion = 4, kFlags = 6, kIdentity = 8, kCount = 24, kReserved = 28,
                 kLength = 32;
constexpr size_t kHash = 0, kParent = 16, kTokens = 32, kEntryReserved = 36, kBytes = 40, kSum = 48;
}  // namespace batch_at

Status batch_malformed(const std::string& what) {
  return Status::invalid_argument("kv batch frame: " + what);
}

// One entry → a block header, or InvalidArgument (`i`: its index, for the message).
Result<KvFrameHeader> decode_batch_entry(const std::byte* p, size_t i,
                                         const kv::BlockHash& identity) {
  const std::string which = "block " + std::to_string(i) + ": ";
  KvFrameHeader h;
  h.kv_identity = identity;
  h.block_hash = get_hash(p + batch_at::kHash);
  h.parent_hash = get_hash(p + batch_at::kParent);
  h.num_tokens = static_cast<uint32_t>(get_le(p + batch_at::kTokens, 4));
  h.payload_bytes = get_le(p + batch_at::kBytes, 8);
  h.payload_checksum = get_le(p + batch_at::kSum, 8);
  if (get_le(p + batch_at::kEntryReserved, 4) != 0)
    return batch_malformed(which + "nonzero reserved field");
  if (h.num_tokens == 0 || h.num_tokens > kKvFrameMaxTokens) {
    return batch_malformed(which + "token count " + std::to_string(h.num_tokens) + " out of range");
  }
  if (h.payload_bytes > kKvFrameMaxPayloadBytes) {
    return batch_malformed(which + "payload of " + std::to_string(h.payload_bytes) +
                           " bytes exceeds the limit");
  }
  return h;
}

}  // namespace

uint64_t KvBatchHeader::payload_bytes() const {
  uint64_t n = 0;
  for (const KvFrameHeader& b : blocks) n += b.payload_bytes;
  return n;
}

std::vector<std::byte> encode_batch_header(const KvBatchHeader& header) {
  const size_t n = header.blocks.size();
  KEEL_CHECK(n >= 1 && n <= kKvBatchMaxBlocks);
  std::vector<std::byte> out(kv_batch_header_bytes(n));
  std::byte* p = out.data();
  put_le(p + batch_at::kMagic, kKvBatchMagic, 4);
  put_le(p + batch_at::kVersion, kKvBatchVersion, 2);
  put_le(p + batch_at::kFlags, 0, 2);
  put_hash(p + batch_at::kIdentity, header.kv_identity);
  put_le(p + batch_at::kCount, n, 4);
  put_le(p + batch_at::kReserved, 0, 4);
  put_le(p + batch_at::kLength, header.payload_bytes(), 8);
  for (size_t i = 0; i < n; ++i) {
    const KvFrameHeader& b = header.blocks[i];
    std::byte* e = p + kKvBatchFixedBytes + i * kKvBatchEntryBytes;
    put_hash(e + batch_at::kHash, b.block_hash);
    put_hash(e + batch_at::kParent, b.parent_hash);
    put_le(e + batch_at::kTokens, b.num_tokens, 4);
    put_le(e + batch_at::kEntryReserved, 0, 4);
    put_le(e + batch_at::kBytes, b.payload_bytes, 8);
    put_le(e + batch_at::kSum, b.payload_checksum, 8);
  }
  const size_t summed = out.size() - 8;
  put_le(p + summed, XXH3_64bits(p, summed), 8);
  return out;
}

uint32_t kv_header_magic(std::span<const std::byte> bytes) {
  return bytes.size() < 4 ? 0 : static_cast<uint32_t>(get_le(bytes.data(), 4));
}

Result<KvBatchHeader> decode_batch_header(std::span<const std::byte> bytes) {
  if (bytes.size() < kv_batch_header_bytes(1)) {
    return batch_malformed("header of " + std::to_string(bytes.size()) + " bytes, at least " +
                           std::to_string(kv_batch_header_bytes(1)) + " expected");
  }
  const std::byte* p = bytes.data();
  if (get_le(p + batch_at::kMagic, 4) != kKvBatchMagic) return batch_malformed("bad magic");
  if (get_le(p + batch_at::kVersion, 2) != kKvBatchVersion) {
    return batch_malformed("unsupported version " +
                           std::to_string(get_le(p + batch_at::kVersion, 2)));
  }
  if (get_le(p + batch_at::kFlags, 2) != 0 || get_le(p + batch_at::kReserved, 4) != 0) {
    return batch_malformed("nonzero flags or reserved field");
  }
  const uint64_t n = get_le(p + batch_at::kCount, 4);
  if (n == 0 || n > kKvBatchMaxBlocks) {
    return batch_malformed("block count " + std::to_string(n) + " out of range [1, " +
                           std::to_string(kKvBatchMaxBlocks) + "]");
  }
  if (bytes.size() != kv_batch_header_bytes(n)) {
    return batch_malformed("header of " + std::to_string(bytes.size()) + " bytes, " +
                           std::to_string(kv_batch_header_bytes(n)) + " expected for " +
                           std::to_string(n) + " blocks");
  }
  const size_t summed = bytes.size() - 8;
  if (get_le(p + summed, 8) != XXH3_64bits(p, summed)) {
    return batch_malformed("header checksum mismatch");
  }
  KvBatchHeader h;
  h.kv_identity = get_hash(p + batch_at::kIdentity);
  h.blocks.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    KEEL_ASSIGN_OR_RETURN(
        KvFrameHeader b,
        decode_batch_entry(p + kKvBatchFixedBytes + i * kKvBatchEntryBytes, i, h.kv_identity));
    h.blocks.push_back(b);
  }
  const uint64_t total = get_le(p + batch_at::kLength, 8);
  if (total != h.payload_bytes()) {
    return batch_malformed("payload of " + std::to_string(total) + " bytes, the blocks sum to " +
                           std::to_string(h.payload_bytes()));
  }
  if (total > kKvBatchMaxPayloadBytes) {
    return batch_malformed("payload of " + std::to_string(total) + " bytes exceeds the limit");
  }
  return h;
}

std::span<const std::byte> batch_block_payload(const KvBatchHeader& header,
                                               std::span<const std::byte> payload, size_t i) {
  KEEL_CHECK(i < header.blocks.size() && payload.size() == header.payload_bytes());
  size_t offset = 0;
  for (size_t j = 0; j < i; ++j) offset += header.blocks[j].payload_bytes;
  return payload.subspan(offset, header.blocks[i].payload_bytes);
}

std::vector<std::byte> encode_batch_frame(const KvBatchHeader& header,
                                          std::span<const std::span<const std::byte>> payloads) {
  KEEL_CHECK(payloads.size() == header.blocks.size());
  std::vector<std::byte> out = encode_batch_header(header);
  out.reserve(out.size() + header.payload_bytes());
  for (size_t i = 0; i < payloads.size(); ++i) {
    KEEL_CHECK(payloads[i].size() == header.blocks[i].payload_bytes);
    out.insert(out.end(), payloads[i].begin(), payloads[i].end());
  }
  return out;
}

Result<KvBatchView> decode_batch_frame(std::span<const std::byte> bytes) {
  if (bytes.size() < kKvBatchFixedBytes) return batch_malformed("shorter than its header");
  // An out-of-range count is reported by decode_batch_header; the smallest header reaches it.
  const uint64_t n = get_le(bytes.data() + batch_at::kCount, 4);
  const size_t header_bytes = kv_batch_header_bytes(n >= 1 && n <= kKvBatchMaxBlocks ? n : 1);
  if (bytes.size() < header_bytes) return batch_malformed("shorter than its header");
  KEEL_ASSIGN_OR_RETURN(KvBatchHeader header, decode_batch_header(bytes.first(header_bytes)));
  const std::span<const std::byte> payload = bytes.subspan(header_bytes);
  if (payload.size() != header.payload_bytes()) {
    return batch_malformed(std::to_string(payload.size()) + " payload bytes, header says " +
                           std::to_string(header.payload_bytes()));
  }
  KvBatchView view;
  size_t offset = 0;
  for (size_t i = 0; i < header.blocks.size(); ++i) {
    const std::span<const std::byte> block =
        payload.subspan(offset, header.blocks[i].payload_bytes);
    offset += block.size();
    if (!check_frame_payload(header.blocks[i], block).ok()) {
      return Status::corrupt("kv batch frame: block " + std::to_string(i) +
                             " payload checksum mismatch");
    }
    view.payloads.push_back(block);
  }
  view.header = std::move(header);
  return view;
}

}  // namespace keel::cluster
