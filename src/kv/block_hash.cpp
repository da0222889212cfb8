// Block hash encoding (see block_hash.h for the byte layout). Thread safety: pure functions.
#include "kv/block_hash.h"

#include <xxhash.h>

#include <vector>

namespace keel::kv {
namespace {

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put_hash(std::vector<uint8_t>& out, const BlockHash& h) {
  put_u64(out, h.lo);
  put_u64(out, h.hi);
}

BlockHash digest(const void* data, size_t size) {
  const XXH128_hash_t h = XXH3_128bits(data, size);  // seed 0
  return BlockHash{h.low64, h.high64};
}

}  // namespace

BlockHash hash_block(const BlockHash& parent, std::span<const int32_t> tokens,
                     const BlockHash& extra) {
  std::vector<uint8_t> buf;
  buf.reserve(36 + 4 * tokens.size());
  put_hash(buf, parent);
  put_hash(buf, extra);
  put_u32(buf, static_cast<uint32_t>(tokens.size()));
  for (int32_t t : tokens) put_u32(buf, static_cast<uint32_t>(t));
  return digest(buf.data(), buf.size());
}

BlockHash request_extra_key(const BlockHash& model_id, std::string_view cache_salt) {
  std::vector<uint8_t> buf;
  buf.reserve(24 + cache_salt.size());
  put_hash(buf, model_id);
  put_u64(buf, cache_salt.size());
  buf.insert(buf.end(), cache_salt.begin(), cache_salt.end());
  return digest(buf.data(), buf.size());
}

BlockHash hash_bytes(std::span<const std::byte> bytes) {
  return digest(bytes.data(), bytes.size());
}

}  // namespace keel::kv
