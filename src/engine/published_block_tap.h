// PublishedBlockTap: how something outside the engine sees the KV blocks the prefix cache
// publishes (EngineDeps::published_blocks) — the streamed KV handoff of a prefill TE copies a
// prompt's blocks out this way as each chunked-prefill step publishes them, with no round trip
// through the engine's inbox. Part of the engine's API (header only): front ends build one
// without linking the engine.
//
// Both functions run on the engine thread, right after the step that computed the block and
// before that step's token events, and must not block: `wants` picks a block by its prefix key
// (cheap, no copy); `take` gets a picked block's payload (the tiers' layout,
// Engine::kv_block_bytes() long), valid only during the call.
#pragma once

#include <cstddef>
#include <functional>
#include <span>

#include "kv/block_hash.h"

namespace keel::engine {

struct PublishedBlockTap {
  std::function<bool(const kv::BlockHash& hash)> wants;
  std::function<void(const kv::BlockHash& hash, std::span<const std::byte> payload)> take;
  [[nodiscard]] explicit operator bool() const { return wants && take; }
};

}  // namespace keel::engine
