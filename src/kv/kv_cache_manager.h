// KvCacheManager: per-request block tables over one BlockPool, plus the prefix cache (lookup at
// admission, publication of full computed blocks). It hands out block ids only; the engine owns
// the KV bytes (model::KvStorage) and performs the copies make_writable() asks for.
// It also holds the session pins (kv_pins.h: KV kept across tool calls): published blocks kept
// referenced for a TTL so that no other traffic evicts them.
// Invariants: every block in a table holds one reference for that table, and every block of a
// pin one for that pin (a block in k tables and p pins has ref_count k + p; a released page,
// kNoBlock, holds none); a block with a hash is full, computed and never written (see
// make_writable() for when copy-on-write happens in keel). Thread safety: none; owned by the
// engine thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"
#include "kv/block_hash.h"
#include "kv/block_pool.h"
#include "kv/cache_event_log.h"
#include "kv/kv_pins.h"

namespace keel::kv {

struct KvCacheConfig {
  int32_t num_blocks = 0;           // blocks in the pool (the engine derives it from a byte size)
  int32_t block_size = 16;          // tokens per block
  bool enable_prefix_cache = true;  // false: no lookup, no publication
  bool record_evictions = false;    // log evicted cached blocks for demotion (take_evictions())
  KvPinLimits pins;                 // session pins: TTL and caps (default: off)
  [[nodiscard]] Status validate() const;
};

using BlockCopy = std::pair<BlockId, BlockId>;  // {src, dst}: copy src's bytes into dst

class KvCacheManager {
 public:
  explicit KvCacheManager(const KvCacheConfig& config);  // config must validate()

  // A run of cached blocks covering a sequence's first num_tokens tokens.
  struct PrefixHit {
    std::vector<BlockId> blocks;    // ceil(num_tokens / block_size) blocks, in order
    std::vector<BlockHash> hashes;  // their hashes (parallel to blocks)
    int32_t num_tokens = 0;         // tokens covered (≤ tokens.size() - 1)
  };

  // The longest run of cached full blocks for `tokens` under `extra_key`, capped so that at least
  // one token is left to compute (so the caller gets logits). Takes no references; the hit is
  // valid until the pool changes. Empty when the prefix cache is disabled. Counts a query.
  PrefixHit find_prefix(std::span<const int32_t> tokens, const BlockHash& extra_key);
  // find_prefix without counting; the caller counts with record_prefix_query() once it uses it.
  [[nodiscard]] PrefixHit lookup_prefix(std::span<const int32_t> tokens,
                                        const BlockHash& extra_key) const;
  void record_prefix_query(int64_t query_tokens, int64_t hit_tokens);

  // Gives request `id` blocks covering num_tokens_total tokens, taking `hit`'s blocks first
  // (only for a request that has no blocks yet; the hit must come from this pool's current
  // state). Returns the table, or nullopt — with no change at all — when too few blocks are free.
  std::optional<std::span<const BlockId>> allocate(RequestKey id, int32_t num_tokens_total,
                                                   const PrefixHit* hit = nullptr);

  // Publishes `id`'s full blocks among tokens [0, num_computed) in the prefix index (incremental:
  // blocks published before are skipped). A block whose hash already names another block stays
  // private. No-op when the prefix cache is disabled.
  void publish_full_blocks(RequestKey id, std::span<const int32_t> tokens, int32_t num_computed,
                           const BlockHash& extra_key);

  // Makes the block holding position `pos` of `id` safe to write: a block shared with other
  // tables is replaced in `id`'s table by a fresh copy (the caller copies the bytes before
  // writing); a published block held by `id` alone is un-published in place.
  // When it arises in keel: only full blocks are shared, so decode never needs it. The one case
  // is a prefix hit that covers every block of a block-aligned sequence: the hit stops one token
  // short (the last token is computed for its logits), so that token's row lies in the last hit
  // block — Scheduler admission calls make_writable() for it.
  struct WritableResult {
    bool no_room = false;           // a copy was needed but no block was free; nothing changed
    std::optional<BlockCopy> copy;  // the copy to perform before the write
  };
  WritableResult make_writable(RequestKey id, int32_t pos);

  // Sparse decode: gives back the block of page `index` of `id`'s table (one reference dropped;
  // the entry becomes kNoBlock, so positions keep their page numbers). The page must be full and
  // below the table's last; a page released before, or an unknown id, is a no-op. Published
  // hashes past a released page are no longer extended (publication stops at the first hole).
  void release_block(RequestKey id, int32_t index);
  // Blocks `id`'s table references (holes excluded).
  [[nodiscard]] int32_t num_held_blocks(RequestKey id) const;

  // Speculative decoding's rollback: shrinks `id`'s table to the blocks covering its first
  // `num_tokens` positions, releasing the rest (last first). The released blocks hold only
  // positions past num_tokens — never published (the caller publishes computed positions only,
  // checked) — so they return to the free list uncached. No-op for unknown ids or a table that
  // is not longer.
  void truncate(RequestKey id, int32_t num_tokens);

  // Releases `id`'s blocks (last block first, so a sequence's earlier blocks are evicted last);
  // released blocks keep their hash and stay findable until evicted. No-op for unknown ids.
  void free(RequestKey id);

  [[nodiscard]] std::span<const BlockId> block_table(RequestKey id) const;  // empty if unknown
  [[nodiscard]] int32_t num_free_blocks() const { return pool_.num_free(); }
  [[nodiscard]] int32_t num_blocks() const { return pool_.num_blocks(); }
  [[nodiscard]] int32_t block_size() const { return config_.block_size; }
  [[nodiscard]] bool prefix_cache_enabled() const { return config_.enable_prefix_cache; }
  [[nodiscard]] float usage() const;  // fraction of blocks referenced, 0..1
  // Blocks needed to hold num_tokens tokens.
  [[nodiscard]] int32_t blocks_for(int64_t num_tokens) const;
  [[nodiscard]] int64_t prefix_queries_tokens() const { return queries_tokens_; }
  [[nodiscard]] int64_t prefix_hits_tokens() const { return hits_tokens_; }
  // Cached blocks evicted from the pool since the last call (only with record_evictions): their
  // bytes are intact until the next forward pass, so the engine can demote them to a lower tier.
  std::vector<EvictedCachedBlock> take_evictions() { return pool_.take_evictions(); }
  // Forgets every cached hash (blocks in use keep working; they are just no longer shared) and
  // releases every session pin.
  void reset_prefix_cache();

  // Session pins (kv_pins.h). Pins, as pin `pin` of `tenant`, the blocks the prefix index holds
  // for `id`'s published chain: each of its table's hashes looked up in turn (the block another
  // table published under the same hash counts), up to the first hash no longer indexed. Each
  // pinned block keeps one reference until the pin is released (expire_pins, release_pin, a cap,
  // or a newer pin of the tenant holding all its blocks), then rejoins the free list as an ordinary
  // cached block (LRU, demoted to the tiers when evicted). Call it before free(id). Returns the
  // blocks pinned (0: pinning off, nothing published, or `pin` pinned already).
  int32_t pin_published(RequestKey id, PinId pin, const std::string& tenant, int64_t now_ns);
  // Releases pin `pin`; false when there is none.
  bool release_pin(PinId pin);
  // Releases every pin whose deadline is ≤ now_ns.
  void expire_pins(int64_t now_ns);
  // Releases the oldest pin, for a request that cannot be admitted while nothing else runs (its
  // blocks are the only ones that could free up); false when there is none.
  bool release_oldest_pin();
  [[nodiscard]] const KvPins& pins() const { return pins_; }

  // With `on`, logs every change of the prefix index (kv/cache_event_log.h) until
  // take_cache_events() collects them: blocks published, keys evicted or un-published, clears.
  void set_record_cache_events(bool on);
  // The index changes logged since the last call, oldest first (empty when not recording).
  std::vector<CacheEvent> take_cache_events();

  [[nodiscard]] const BlockPool& pool() const { return pool_; }
  // Pool invariants plus: each block's ref count equals the number of tables holding it.
  [[nodiscard]] Status check_invariants() const;

 private:
  struct Table {
    std::vector<BlockId> blocks;
    std::vector<BlockHash> hashes;  // hashes of blocks [0, hashes.size()), chained
  };

  // Gives back the references of released pins.
  void drop_pins(const std::vector<ReleasedPin>& released);

  KvCacheConfig config_;
  BlockPool pool_;
  KvPins pins_;
  std::unordered_map<RequestKey, Table> tables_;
  int64_t queries_tokens_ = 0;
  int64_t hits_tokens_ = 0;
  // Non-null while recording; heap-held so the pool's pointer survives a move of the manager.
  std::unique_ptr<CacheEventLog> events_;
};

}  // namespace keel::kv
