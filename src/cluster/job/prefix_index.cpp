// The global prefix index built from KV events, and the router's prompt block hashes
// (prefix_index.h).
#include "cluster/job/prefix_index.h"

#include "engine/model_identity.h"

#include <type_traits>
#include <variant>

#include "core/check.h"
#include "engine/model_identity.h"

namespace keel::cluster {
namespace {

uint8_t tier_bit(KvTier tier) { return static_cast<uint8_t>(1u << static_cast<uint8_t>(tier)); }

// The best tier among a non-empty mask's bits.
KvTier best_tier(uint8_t mask) {
  if (mask & tier_bit(KvTier::kPool)) return KvTier::kPool;
  if (mask & tier_bit(KvTier::kDram)) return KvTier::kDram;
  return KvTier::kDisk;
}

Status unknown_medium(const std::optional<std::string>& medium) {
  return Status::invalid_argument("KV event with unknown medium \"" + medium.value_or("") +
                                  "\" (expected pool, dram or disk); event skipped");
}

}  // namespace

std::optional<KvTier> parse_kv_medium(const std::optional<std::string>& medium) {
  if (!medium.has_value() || *medium == "pool") return KvTier::kPool;
  if (*medium == "dram") return KvTier::kDram;
  if (*medium == "disk") return KvTier::kDisk;
  return std::nullopt;
}

void PrefixIndex::store(Blocks& blocks, std::span<const uint64_t> hashes, KvTier tier) {
  for (uint64_t h : hashes) blocks[h] |= tier_bit(tier);
}

void PrefixIndex::remove(Blocks& blocks, std::span<const uint64_t> hashes, KvTier tier) {
  for (uint64_t h : hashes) {
    auto it = blocks.find(h);
    if (it == blocks.end()) continue;
    it->second &= static_cast<TierMask>(~tier_bit(tier));
    if (it->second == 0) blocks.erase(it);
  }
}

Status PrefixIndex::apply(std::string_view te_id, const KvEventBatch& batch) {
  Status first_error;
  auto it = tes_.find(te_id);
  for (const KvEvent& event : batch.events) {
    std::visit(
        [&](const auto& e) {
          using E = std::decay_t<decltype(e)>;
          if constexpr (std::is_same_v<E, AllBlocksCleared>) {
            if (it != tes_.end()) it->second.clear();
          } else {
            const std::optional<KvTier> tier = parse_kv_medium(e.medium);
            if (!tier.has_value()) {
              if (first_error.ok()) first_error = unknown_medium(e.medium);
              return;
            }
            if constexpr (std::is_same_v<E, BlockStored>) {
              if (it == tes_.end()) it = tes_.emplace(std::string(te_id), Blocks{}).first;
              store(it->second, e.block_hashes, *tier);
            } else {
              if (it != tes_.end()) remove(it->second, e.block_hashes, *tier);
            }
          }
        },
        event);
  }
  if (it != tes_.end() && it->second.empty()) tes_.erase(it);
  return first_error;
}

void PrefixIndex::remove_te(std::string_view te_id) {
  auto it = tes_.find(te_id);
  if (it != tes_.end()) tes_.erase(it);
}

PrefixMatch PrefixIndex::match(std::span<const uint64_t> prompt_block_hashes,
                               std::string_view te_id) const {
  PrefixMatch m;
  auto te = tes_.find(te_id);
  if (te == tes_.end()) return m;
  for (uint64_t h : prompt_block_hashes) {
    auto it = te->second.find(h);
    if (it == te->second.end()) break;
    ++m.num_blocks;
    if (best_tier(it->second) == KvTier::kPool) {
      ++m.num_pool_blocks;
    } else {
      ++m.num_lower_blocks;
    }
  }
  return m;
}

std::vector<PrefixMatch> PrefixIndex::match(std::span<const uint64_t> prompt_block_hashes,
                                            std::span<const std::string> te_ids) const {
  std::vector<PrefixMatch> out;
  out.reserve(te_ids.size());
  for (const std::string& id : te_ids) out.push_back(match(prompt_block_hashes, id));
  return out;
}

size_t PrefixIndex::num_blocks(std::string_view te_id) const {
  auto it = tes_.find(te_id);
  return it == tes_.end() ? 0 : it->second.size();
}

std::vector<uint64_t> prompt_block_hashes(const kv::BlockHash& model_key,
                                          std::string_view cache_salt,
                                          std::span<const int32_t> tokens, int32_t block_size) {
  KEEL_CHECK(block_size > 0);
  const std::vector<kv::BlockHash> keys =
      engine::prefix_block_hashes(model_key, cache_salt, tokens, block_size);
  std::vector<uint64_t> out;
  out.reserve(keys.size());
  for (const kv::BlockHash& k : keys) out.push_back(k.lo);
  return out;
}

}  // namespace keel::cluster
