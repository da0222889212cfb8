// The on-disk format of one KV block in the disk tier (T2): an 80-byte header, then the payload.
// All integers little-endian:
//   0  magic "KEELKVB1" (8 bytes)      8  version u32 (1)        12 header size u32 (80)
//   16 identity.lo u64, .hi u64        32 key.lo u64, .hi u64
//   48 payload size u64                56 payload checksum u64 (XXH3-64 of the payload)
//   64 write sequence u64 (store-wide, orders entries for LRU after a restart)
//   72 header checksum u64 (XXH3-64 of bytes 0..71)
// The identity names the model, KV dtype and block size the payload belongs to; a reader
// rejects any other identity, so another model never reads it.
// Thread safety: pure functions over values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "kv/block_hash.h"

namespace keel::kv {

inline constexpr size_t kBlockFileHeaderBytes = 80;

struct BlockFileHeader {
  BlockHash identity;
  BlockHash key;
  uint64_t payload_bytes = 0;
  uint64_t payload_checksum = 0;
  uint64_t sequence = 0;
};

// The header bytes for `h` (its header checksum filled in).
[[nodiscard]] std::vector<std::byte> encode_block_file_header(const BlockFileHeader& h);
// Parses and validates header bytes (at least kBlockFileHeaderBytes): Corrupt naming `what` on a
// wrong magic, version, size or header checksum.
[[nodiscard]] Result<BlockFileHeader> decode_block_file_header(std::span<const std::byte> bytes,
                                                               const std::string& what);
[[nodiscard]] uint64_t block_payload_checksum(std::span<const std::byte> payload);

// 32 lowercase hex digits: hi then lo (a file or directory name).
[[nodiscard]] std::string block_hash_hex(const BlockHash& h);

}  // namespace keel::kv
