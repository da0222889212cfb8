// Little-endian field access for the transfer service's frame headers (kv_transfer_frame.h,
// weights_frame.h): fixed-width integers and 128-bit hashes at byte offsets.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kv/block_hash.h"

namespace keel::cluster::frame_bytes {

inline void put_le(std::byte* p, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
inline uint64_t get_le(const std::byte* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}
inline void put_hash(std::byte* p, const kv::BlockHash& h) {
  put_le(p, h.lo, 8);
  put_le(p + 8, h.hi, 8);
}
inline kv::BlockHash get_hash(const std::byte* p) { return {get_le(p, 8), get_le(p + 8, 8)}; }

}  // namespace keel::cluster::frame_bytes
