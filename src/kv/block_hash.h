// Block hashes: the 128-bit content keys of the prefix index. A full block's key is XXH3-128
// (seed 0) over an explicit little-endian encoding of (parent key, extra key, token count, token
// ids), so a key names the block's tokens AND everything before them, and is stable across
// processes, compilers and restarts (no language hash seeds; pinned by a golden test).
//
// Encoding of hash_block (all integers little-endian):
//   parent.lo u64 | parent.hi u64 | extra.lo u64 | extra.hi u64 | n u32 | tokens[0..n) i32
// The first block of a sequence uses kRootHash (all zero) as its parent.
// Thread safety: pure functions over values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace keel::kv {

using BlockId = int32_t;  // index of a block in the KV pool, [0, num_blocks)
// A released page in a block table (sparse decode gave its block back; its positions are never
// read again).
inline constexpr BlockId kNoBlock = -1;
using RequestKey = int64_t;  // the engine's handle for a request (same as engine::RequestKey)

struct BlockHash {
  uint64_t lo = 0;  // low 64 bits of the XXH3-128 digest
  uint64_t hi = 0;  // high 64 bits
  friend bool operator==(const BlockHash&, const BlockHash&) = default;
};

// Parent of a sequence's first block.
inline constexpr BlockHash kRootHash{};

// For unordered containers: the digest is already uniformly distributed.
struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const { return static_cast<size_t>(h.lo ^ h.hi); }
};

// Key of a full block: its tokens after the block keyed `parent`, under `extra` (the request's
// extra key: model identity and cache salt).
[[nodiscard]] BlockHash hash_block(const BlockHash& parent, std::span<const int32_t> tokens,
                                   const BlockHash& extra);

// A request's extra key: hash of model_id.lo u64 | model_id.hi u64 | salt length u64 | salt bytes.
// Different salts (including "" vs any non-empty salt) give different keys, so tenants never share
// blocks across salts.
[[nodiscard]] BlockHash request_extra_key(const BlockHash& model_id, std::string_view cache_salt);

// XXH3-128 (seed 0) of raw bytes, e.g. a model identity from its GGUF metadata.
[[nodiscard]] BlockHash hash_bytes(std::span<const std::byte> bytes);

}  // namespace keel::kv
