// Engine cache events → vLLM KV events (see kv_event_convert.h).
#include "cluster/kv_events/kv_event_convert.h"

#include <chrono>
#include <utility>

#include "cluster/kv_events/kv_event_publisher.h"

namespace keel::cluster {
namespace {

const char* medium_name(kv::CacheMedium medium) {
  switch (medium) {
    case kv::CacheMedium::kPool:
      return kMediumPool;
    case kv::CacheMedium::kHost:
      return kMediumDram;
    case kv::CacheMedium::kDisk:
      return kMediumDisk;
  }
  return kMediumPool;
}

}  // namespace

KvEventBatch to_kv_event_batch(std::span<const kv::CacheEvent> events, int32_t block_size,
                               double ts, std::optional<int32_t> data_parallel_rank) {
  KvEventBatch batch;
  batch.ts = ts;
  batch.data_parallel_rank = data_parallel_rank;
  for (const kv::CacheEvent& e : events) {
    switch (e.kind) {
      case kv::CacheEventKind::kStored: {
        const char* medium = medium_name(e.medium);
        auto* last =
            batch.events.empty() ? nullptr : std::get_if<BlockStored>(&batch.events.back());
        // A tier's blocks carry no parent: each is its own event (they need not chain).
        if (last == nullptr || last->medium != medium || e.medium != kv::CacheMedium::kPool ||
            last->block_hashes.back() != e.parent.lo) {
          BlockStored s;
          if (!(e.parent == kv::kRootHash)) s.parent_block_hash = e.parent.lo;
          s.block_size = block_size;
          s.medium = medium;
          batch.events.emplace_back(std::move(s));
          last = &std::get<BlockStored>(batch.events.back());
        }
        last->block_hashes.push_back(e.hash.lo);
        last->token_ids.insert(last->token_ids.end(), e.tokens.begin(), e.tokens.end());
        break;
      }
      case kv::CacheEventKind::kRemoved: {
        const char* medium = medium_name(e.medium);
        auto* last =
            batch.events.empty() ? nullptr : std::get_if<BlockRemoved>(&batch.events.back());
        if (last == nullptr || last->medium != medium) {
          batch.events.emplace_back(BlockRemoved{{}, medium});
          last = &std::get<BlockRemoved>(batch.events.back());
        }
        last->block_hashes.push_back(e.hash.lo);
        break;
      }
      case kv::CacheEventKind::kCleared:
        batch.events.emplace_back(AllBlocksCleared{});
        break;
    }
  }
  return batch;
}

std::function<void(std::vector<kv::CacheEvent>)> publishing_sink(KvEventPublisher* publisher,
                                                                 int32_t block_size) {
  return [publisher, block_size](std::vector<kv::CacheEvent> events) {
    const double ts =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    (void)publisher->publish(to_kv_event_batch(events, block_size, ts));
  };
}

}  // namespace keel::cluster
