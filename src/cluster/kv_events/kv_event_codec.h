// The msgpack codec of KvEventBatch, byte-compatible with vLLM's ZmqEventPublisher payloads
// (vllm/distributed/kv_events.py as of the v0.10.x–v0.11.x line that carries `medium` and
// `data_parallel_rank`: msgspec structs with array_like=True, omit_defaults=True, tag=True).
// Layout matched, each struct an array with its fields in declaration order:
//   KVEventBatch     = [ts float64, [event...], data_parallel_rank int]   (rank omitted when none:
//                      omit_defaults drops a trailing default field)
//   BlockStored      = ["BlockStored", [hash uint...], parent uint|nil, [token int...],
//                       block_size int, lora_id int|nil, medium str|nil]
//   BlockRemoved     = ["BlockRemoved", [hash uint...], medium str|nil]
//   AllBlocksCleared = ["AllBlocksCleared"]
// Integers take msgpack's smallest form (as msgspec writes them); ts is always float64.
// Decoding is total: any bytes give a batch or InvalidArgument naming the problem. It accepts what
// msgspec accepts of this layout — an integer ts, trailing fields it does not know (later vLLM
// appends lora_name, extra_keys, group_idx, ...), BlockStored without lora_id/medium (older vLLM),
// negative hashes (vLLM once used Python's hash(); read as their two's complement) — and rejects
// nesting deeper than kMaxDepth, trailing bytes and out-of-range integers.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cluster/kv_events/kv_event.h"
#include "core/result.h"

namespace keel::cluster {

using Bytes = std::vector<uint8_t>;

// Nesting limit of a decoded payload (the layout itself needs 4: batch, events, event, list).
inline constexpr int kMaxKvEventDepth = 8;

[[nodiscard]] Bytes encode_kv_event_batch(const KvEventBatch& batch);
[[nodiscard]] Result<KvEventBatch> decode_kv_event_batch(std::span<const uint8_t> bytes);

}  // namespace keel::cluster
