// Engine cache events → vLLM KV events: turns one step's kv::CacheEvents (the prefix index's
// changes, logged on the engine thread) into a KvEventBatch, and makes the EngineDeps sink that
// publishes them. Consecutive stored blocks that chain (each one's parent the previous one's key)
// become one BlockStored, consecutive removals one BlockRemoved, as vLLM groups them; hashes are
// the keys' low 64 bits. The medium is the event's: "pool" for the pool's prefix index, "dram" /
// "disk" for a block the host tier T1 / disk tier T2 gained or dropped (kv_tiers.h). A tier's
// BlockStored carries its hash only — no parent, no token_ids (a tier keeps payloads, not
// tokens) — one event per block. lora_id stays absent: a LoRA request's blocks carry keys of
// its adapter's identity already (engine::lora_prefix_key).
// Thread safety: to_kv_event_batch is pure; the sink may run on any one thread at a time (the
// engine thread) and only enqueues into the publisher.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "cluster/kv_events/kv_event.h"
#include "kv/cache_event_log.h"

namespace keel::cluster {

class KvEventPublisher;

inline constexpr const char* kMediumPool = "pool";
inline constexpr const char* kMediumDram = "dram";
inline constexpr const char* kMediumDisk = "disk";

// `events` in order → one batch stamped `ts` (seconds since the Unix epoch); `block_size`: the
// engine's tokens per block.
[[nodiscard]] KvEventBatch to_kv_event_batch(std::span<const kv::CacheEvent> events,
                                             int32_t block_size, double ts,
                                             std::optional<int32_t> data_parallel_rank = {});

// An EngineDeps::cache_events sink that converts each step's events (stamped with the wall
// clock) and hands them to `publisher`, which must outlive the engine.
[[nodiscard]] std::function<void(std::vector<kv::CacheEvent>)> publishing_sink(
    KvEventPublisher* publisher, int32_t block_size);

}  // namespace keel::cluster
