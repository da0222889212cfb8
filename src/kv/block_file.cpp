// Block file header encoding: see block_file.h.
#include "kv/block_file.h"

#include <xxhash.h>

#include <cstring>

namespace keel::kv {
namespace {

constexpr char kMagic[8] = {'K', 'E', 'E', 'L', 'K', 'V', 'B', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kChecksummed = 72;  // header bytes covered by the header checksum

void put_u32(std::byte* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
void put_u64(std::byte* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
uint32_t get_u32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t get_u64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

std::vector<std::byte> encode_block_file_header(const BlockFileHeader& h) {
  std::vector<std::byte> out(kBlockFileHeaderBytes);
  std::byte* p = out.data();
  std::memcpy(p, kMagic, 8);
  put_u32(p + 8, kVersion);
  put_u32(p + 12, static_cast<uint32_t>(kBlockFileHeaderBytes));
  put_u64(p + 16, h.identity.lo);
  put_u64(p + 24, h.identity.hi);
  put_u64(p + 32, h.key.lo);
  put_u64(p + 40, h.key.hi);
  put_u64(p + 48, h.payload_bytes);
  put_u64(p + 56, h.payload_checksum);
  put_u64(p + 64, h.sequence);
  put_u64(p + 72, XXH3_64bits(p, kChecksummed));
  return out;
}

Result<BlockFileHeader> decode_block_file_header(std::span<const std::byte> bytes,
                                                 const std::string& what) {
  if (bytes.size() < kBlockFileHeaderBytes) {
    return Status::corrupt(what + ": truncated KV block header");
  }
  const std::byte* p = bytes.data();
  if (std::memcmp(p, kMagic, 8) != 0) return Status::corrupt(what + ": not a keel KV block file");
  if (get_u32(p + 8) != kVersion) {
    return Status::corrupt(what + ": unsupported KV block file version " +
                           std::to_string(get_u32(p + 8)));
  }
  if (get_u32(p + 12) != kBlockFileHeaderBytes) {
    return Status::corrupt(what + ": wrong KV block header size");
  }
  if (get_u64(p + 72) != XXH3_64bits(p, kChecksummed)) {
    return Status::corrupt(what + ": KV block header checksum mismatch");
  }
  BlockFileHeader h;
  h.identity = {get_u64(p + 16), get_u64(p + 24)};
  h.key = {get_u64(p + 32), get_u64(p + 40)};
  h.payload_bytes = get_u64(p + 48);
  h.payload_checksum = get_u64(p + 56);
  h.sequence = get_u64(p + 64);
  return h;
}

uint64_t block_payload_checksum(std::span<const std::byte> payload) {
  return XXH3_64bits(payload.data(), payload.size());
}

std::string block_hash_hex(const BlockHash& h) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(32, '0');
  for (int i = 0; i < 16; ++i) {
    s[static_cast<size_t>(i)] = kDigits[(h.hi >> (60 - 4 * i)) & 0xf];
    s[static_cast<size_t>(16 + i)] = kDigits[(h.lo >> (60 - 4 * i)) & 0xf];
  }
  return s;
}

}  // namespace keel::kv
