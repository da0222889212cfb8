// PrefixIndex: the job executor's global view of which TE holds which KV block, built only from
// the TEs' KV events (kv_event.h) — the router's locality input. Per TE it keeps a set of block
// hashes (the `lo` halves of the engines' chained prefix keys), each with the tiers holding it.
//
// Invariants: an entry exists only while at least one tier holds the block, so memory is bounded
// by the number of (TE, block) pairs currently stored — storing a block again is idempotent;
// removing or clearing frees the entries. A block held at several tiers counts at its best tier
// (pool > dram > disk). Events may arrive for TEs the fleet does not know yet: they are indexed.
// Thread safety: none; one owner (the JE's routing thread) applies events and queries.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cluster/kv_events/kv_event.h"
#include "core/status.h"
#include "kv/block_hash.h"

namespace keel::cluster {

// Where a TE holds a block: its KV pool (T0) or a lower tier (host DRAM T1, disk T2).
enum class KvTier : uint8_t { kPool = 0, kDram = 1, kDisk = 2 };

// An event's `medium`: "pool" | "dram" | "disk"; absent means the pool (vLLM leaves it unset for
// the device cache). nullopt for any other name.
[[nodiscard]] std::optional<KvTier> parse_kv_medium(const std::optional<std::string>& medium);

// How much of a prompt's leading blocks one TE holds.
struct PrefixMatch {
  int32_t num_blocks = 0;        // longest run of leading prompt blocks held at any tier
  int32_t num_pool_blocks = 0;   // of that run, blocks whose best tier is the pool
  int32_t num_lower_blocks = 0;  // of that run, blocks held only in dram or on disk
  friend bool operator==(const PrefixMatch&, const PrefixMatch&) = default;
};

class PrefixIndex {
 public:
  // Applies one batch of `te_id`'s events in order: BlockStored adds its hashes at its medium,
  // BlockRemoved removes them from its medium (unknown hashes are ignored), AllBlocksCleared
  // drops every block of the TE. An event with an unknown medium is skipped; the others are
  // still applied, and the result is InvalidArgument naming the first skipped medium.
  Status apply(std::string_view te_id, const KvEventBatch& batch);
  // Forgets a TE (it left the fleet or restarted); no-op for an unknown id.
  void remove_te(std::string_view te_id);

  // `te_id`'s match for a prompt's block hashes (prompt order, first block first); zero for an
  // unknown TE.
  [[nodiscard]] PrefixMatch match(std::span<const uint64_t> prompt_block_hashes,
                                  std::string_view te_id) const;
  // The same for several TEs: result[i] is te_ids[i]'s match.
  [[nodiscard]] std::vector<PrefixMatch> match(std::span<const uint64_t> prompt_block_hashes,
                                               std::span<const std::string> te_ids) const;

  // TEs with at least one indexed block.
  [[nodiscard]] size_t num_tes() const { return tes_.size(); }
  // Distinct blocks indexed for `te_id` (any tier); 0 for an unknown TE.
  [[nodiscard]] size_t num_blocks(std::string_view te_id) const;

 private:
  // Per block: a bit per KvTier holding it (never 0 in the map).
  using TierMask = uint8_t;
  using Blocks = std::unordered_map<uint64_t, TierMask>;

  static void store(Blocks& blocks, std::span<const uint64_t> hashes, KvTier tier);
  static void remove(Blocks& blocks, std::span<const uint64_t> hashes, KvTier tier);

  std::map<std::string, Blocks, std::less<>> tes_;  // TEs with no blocks are erased
};

// The keys of the full blocks of `tokens` as an engine serving `model_key` publishes them for a
// request of salt `cache_salt` (engine::prefix_block_hashes, the one definition), as their low
// halves (`lo`), which is what KV events carry. block_size must be > 0.
[[nodiscard]] std::vector<uint64_t> prompt_block_hashes(const kv::BlockHash& model_key,
                                                        std::string_view cache_salt,
                                                        std::span<const int32_t> tokens,
                                                        int32_t block_size);

}  // namespace keel::cluster
