// KV cache events as vLLM publishes them (vllm/distributed/kv_events.py), so keel's router — and
// any router built for vLLM's events — can index keel's caches exactly: a TE's prefix cache
// stores a full block (BlockStored), evicts one (BlockRemoved), or drops everything
// (AllBlocksCleared). A batch carries a timestamp and the events of one engine step.
//
// Block hashes are the engines' own prefix keys (kv/block_hash.h: XXH3-128 chained from the
// parent, the model identity and the cache salt), carried as their low 64 bits (`lo`) — what a
// router computes from a prompt's tokens with kv::hash_block. `medium` names the tier holding the
// block: "pool" (the KV pool, T0), "dram" (host tier T1), "disk" (T2). lora_id: the adapter
// (none today).
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace keel::cluster {

struct BlockStored {
  std::vector<uint64_t> block_hashes;         // consecutive blocks, parent first
  std::optional<uint64_t> parent_block_hash;  // the block before the first one (none: root)
  std::vector<int32_t> token_ids;             // the blocks' tokens, block_size per block
  int32_t block_size = 0;
  std::optional<int64_t> lora_id;
  std::optional<std::string> medium;
  friend bool operator==(const BlockStored&, const BlockStored&) = default;
};

struct BlockRemoved {
  std::vector<uint64_t> block_hashes;
  std::optional<std::string> medium;
  friend bool operator==(const BlockRemoved&, const BlockRemoved&) = default;
};

struct AllBlocksCleared {
  friend bool operator==(const AllBlocksCleared&, const AllBlocksCleared&) = default;
};

using KvEvent = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

struct KvEventBatch {
  double ts = 0.0;  // seconds since the Unix epoch
  std::vector<KvEvent> events;
  std::optional<int32_t> data_parallel_rank;
  friend bool operator==(const KvEventBatch&, const KvEventBatch&) = default;
};

}  // namespace keel::cluster
