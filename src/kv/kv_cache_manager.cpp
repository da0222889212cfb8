// KvCacheManager implementation (see kv_cache_manager.h). Thread safety: none; engine thread only.
#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <string>

#include "core/check.h"

namespace keel::kv {

Status KvCacheConfig::validate() const {
  if (num_blocks < 1) {
    return Status::invalid_argument("kv cache: num_blocks must be ≥ 1, got " +
                                    std::to_string(num_blocks));
  }
  if (block_size < 1 || block_size > 4096) {
    return Status::invalid_argument("kv cache: block_size must be in [1, 4096], got " +
                                    std::to_string(block_size));
  }
  return Status::ok_status();
}

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : config_(config), pool_(config.num_blocks), pins_(config.pins) {
  pool_.set_record_evictions(config.record_evictions);
  KEEL_CHECK_MSG(config.validate().ok(), "invalid KvCacheConfig");
}

int32_t KvCacheManager::blocks_for(int64_t num_tokens) const {
  return static_cast<int32_t>((num_tokens + config_.block_size - 1) / config_.block_size);
}

float KvCacheManager::usage() const {
  return static_cast<float>(num_blocks() - num_free_blocks()) / static_cast<float>(num_blocks());
}

KvCacheManager::PrefixHit KvCacheManager::lookup_prefix(std::span<const int32_t> tokens,
                                                        const BlockHash& extra_key) const {
  PrefixHit hit;
  if (!config_.enable_prefix_cache || tokens.empty()) return hit;
  const size_t bs = static_cast<size_t>(config_.block_size);
  BlockHash parent = kRootHash;
  for (size_t i = 0; (i + 1) * bs <= tokens.size(); ++i) {
    const BlockHash h = hash_block(parent, tokens.subspan(i * bs, bs), extra_key);
    const std::optional<BlockId> b = pool_.lookup(h);
    if (!b.has_value()) break;
    hit.blocks.push_back(*b);
    hit.hashes.push_back(h);
    parent = h;
  }
  // Leave at least the last token to compute; keep only the blocks the capped run touches.
  const int64_t covered = static_cast<int64_t>(hit.blocks.size()) * config_.block_size;
  hit.num_tokens = static_cast<int32_t>(std::min<int64_t>(covered, tokens.size() - 1));
  const size_t keep = static_cast<size_t>(blocks_for(hit.num_tokens));
  hit.blocks.resize(keep);
  hit.hashes.resize(keep);
  return hit;
}

void KvCacheManager::record_prefix_query(int64_t query_tokens, int64_t hit_tokens) {
  if (!config_.enable_prefix_cache) return;
  queries_tokens_ += query_tokens;
  hits_tokens_ += hit_tokens;
}

KvCacheManager::PrefixHit KvCacheManager::find_prefix(std::span<const int32_t> tokens,
                                                      const BlockHash& extra_key) {
  PrefixHit hit = lookup_prefix(tokens, extra_key);
  record_prefix_query(static_cast<int64_t>(tokens.size()), hit.num_tokens);
  return hit;
}

std::optional<std::span<const BlockId>> KvCacheManager::allocate(RequestKey id,
                                                                 int32_t num_tokens_total,
                                                                 const PrefixHit* hit) {
  KEEL_CHECK(num_tokens_total >= 0);
  const auto it = tables_.find(id);
  const int32_t have = it == tables_.end() ? 0 : static_cast<int32_t>(it->second.blocks.size());
  const bool use_hit = hit != nullptr && !hit->blocks.empty();
  int32_t hit_blocks = 0;
  int32_t hit_free = 0;  // hit blocks now on the free list: taking them uses up free blocks
  if (use_hit) {
    KEEL_CHECK_MSG(have == 0, "a prefix hit is only for a request without blocks");
    KEEL_CHECK(hit->num_tokens <= num_tokens_total && hit->hashes.size() == hit->blocks.size());
    hit_blocks = static_cast<int32_t>(hit->blocks.size());
    for (int32_t i = 0; i < hit_blocks; ++i) {
      const BlockHash* h = pool_.hash_of(hit->blocks[i]);
      KEEL_CHECK_MSG(h != nullptr && *h == hit->hashes[i], "stale prefix hit");
      if (pool_.is_free(hit->blocks[i])) ++hit_free;
    }
  }
  const int32_t fresh = std::max(0, blocks_for(num_tokens_total) - have - hit_blocks);
  if (pool_.num_free() - hit_free < fresh) return std::nullopt;

  Table& table = tables_[id];
  if (use_hit) {
    for (BlockId b : hit->blocks) {
      pool_.acquire(b);
      table.blocks.push_back(b);
    }
    // Only the fully covered blocks count as published for this request: the last one may be
    // partially recomputed (make_writable) and is re-published afterwards.
    const size_t full = static_cast<size_t>(hit->num_tokens / config_.block_size);
    table.hashes.assign(hit->hashes.begin(), hit->hashes.begin() + full);
  }
  for (int32_t i = 0; i < fresh; ++i) {
    const std::optional<BlockId> b = pool_.take_free();
    KEEL_CHECK(b.has_value());
    table.blocks.push_back(*b);
  }
  return std::span<const BlockId>(table.blocks);
}

void KvCacheManager::publish_full_blocks(RequestKey id, std::span<const int32_t> tokens,
                                         int32_t num_computed, const BlockHash& extra_key) {
  if (!config_.enable_prefix_cache) return;
  const auto it = tables_.find(id);
  if (it == tables_.end()) return;
  Table& table = it->second;
  KEEL_CHECK(num_computed >= 0 && static_cast<size_t>(num_computed) <= tokens.size());
  const size_t bs = static_cast<size_t>(config_.block_size);
  const size_t full = std::min(static_cast<size_t>(num_computed) / bs, table.blocks.size());
  for (size_t i = table.hashes.size(); i < full; ++i) {
    if (table.blocks[i] == kNoBlock) return;  // the chain cannot go past a released page
    const BlockHash parent = i == 0 ? kRootHash : table.hashes[i - 1];
    const BlockHash h = hash_block(parent, tokens.subspan(i * bs, bs), extra_key);
    table.hashes.push_back(h);
    const BlockId b = table.blocks[i];
    if (const BlockHash* current = pool_.hash_of(b)) {
      KEEL_CHECK_MSG(*current == h, "a published block's tokens changed");
      continue;
    }
    // false: another block already holds h; this one stays private
    if (pool_.publish(b, h) && events_ != nullptr) {
      const auto first = tokens.begin() + static_cast<std::ptrdiff_t>(i * bs);
      events_->stored(h, parent,
                      std::vector<int32_t>(first, first + static_cast<std::ptrdiff_t>(bs)));
    }
  }
}

KvCacheManager::WritableResult KvCacheManager::make_writable(RequestKey id, int32_t pos) {
  const auto it = tables_.find(id);
  KEEL_CHECK_MSG(it != tables_.end(), "make_writable for a request without blocks");
  Table& table = it->second;
  KEEL_CHECK(pos >= 0);
  const size_t idx = static_cast<size_t>(pos / config_.block_size);
  KEEL_CHECK_MSG(idx < table.blocks.size(), "make_writable past the end of the block table");
  const BlockId b = table.blocks[idx];
  WritableResult result;
  if (pool_.ref_count(b) == 1) {
    pool_.unpublish(b);  // ours alone: its hash would no longer describe rows being rewritten
  } else {
    const std::optional<BlockId> dst = pool_.take_free();
    if (!dst.has_value()) {
      result.no_room = true;
      return result;
    }
    pool_.release(b);
    table.blocks[idx] = *dst;
    result.copy = BlockCopy{b, *dst};
  }
  if (table.hashes.size() > idx) table.hashes.resize(idx);
  return result;
}

void KvCacheManager::free(RequestKey id) {
  const auto it = tables_.find(id);
  if (it == tables_.end()) return;
  const std::vector<BlockId>& blocks = it->second.blocks;
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) {
    if (*b != kNoBlock) pool_.release(*b);
  }
  tables_.erase(it);
}

void KvCacheManager::truncate(RequestKey id, int32_t num_tokens) {
  const auto it = tables_.find(id);
  if (it == tables_.end()) return;
  Table& t = it->second;
  const auto keep = static_cast<size_t>(blocks_for(num_tokens));
  KEEL_CHECK_MSG(t.hashes.size() <= keep, "truncate: a block past num_tokens is published");
  while (t.blocks.size() > keep) {
    if (t.blocks.back() != kNoBlock) pool_.release(t.blocks.back());
    t.blocks.pop_back();
  }
}

void KvCacheManager::release_block(RequestKey id, int32_t index) {
  const auto it = tables_.find(id);
  if (it == tables_.end()) return;
  std::vector<BlockId>& blocks = it->second.blocks;
  KEEL_CHECK_MSG(index >= 0 && static_cast<size_t>(index) + 1 < blocks.size(),
                 "release_block: only pages below the last may be released");
  BlockId& b = blocks[static_cast<size_t>(index)];
  if (b == kNoBlock) return;
  pool_.release(b);
  b = kNoBlock;
}

int32_t KvCacheManager::num_held_blocks(RequestKey id) const {
  const std::span<const BlockId> t = block_table(id);
  return static_cast<int32_t>(
      std::count_if(t.begin(), t.end(), [](BlockId b) { return b != kNoBlock; }));
}

std::span<const BlockId> KvCacheManager::block_table(RequestKey id) const {
  const auto it = tables_.find(id);
  if (it == tables_.end()) return {};
  return it->second.blocks;
}

void KvCacheManager::reset_prefix_cache() {
  drop_pins(pins_.release_all());
  pool_.clear_index();
  // Tables keep their hash cursors: already published blocks are simply no longer shared.
}

void KvCacheManager::set_record_cache_events(bool on) {
  if (on && events_ == nullptr) events_ = std::make_unique<CacheEventLog>();
  if (!on) events_.reset();
  pool_.set_event_log(events_.get());
}

std::vector<CacheEvent> KvCacheManager::take_cache_events() {
  return events_ != nullptr ? events_->take() : std::vector<CacheEvent>{};
}

int32_t KvCacheManager::pin_published(RequestKey id, PinId pin, const std::string& tenant,
                                      int64_t now_ns) {
  const auto it = tables_.find(id);
  if (it == tables_.end() || !pins_.limits().enabled()) return 0;
  std::vector<BlockId> chain;
  for (const BlockHash& h : it->second.hashes) {
    const std::optional<BlockId> b = pool_.lookup(h);
    if (!b.has_value()) break;
    chain.push_back(*b);
  }
  std::vector<ReleasedPin> released;
  const std::vector<BlockId> pinned = pins_.add(pin, tenant, chain, now_ns, &released);
  for (BlockId b : pinned) pool_.acquire(b);  // before the displaced let go: shared blocks stay
  drop_pins(released);
  return static_cast<int32_t>(pinned.size());
}

bool KvCacheManager::release_pin(PinId pin) {
  std::optional<ReleasedPin> released = pins_.release(pin);
  if (!released.has_value()) return false;
  drop_pins({*released});
  return true;
}

void KvCacheManager::expire_pins(int64_t now_ns) { drop_pins(pins_.expire(now_ns)); }

bool KvCacheManager::release_oldest_pin() {
  std::optional<ReleasedPin> released = pins_.release_oldest();
  if (!released.has_value()) return false;
  drop_pins({*released});
  return true;
}

void KvCacheManager::drop_pins(const std::vector<ReleasedPin>& released) {
  for (const ReleasedPin& p : released) {
    for (BlockId b : p.blocks) pool_.release(b);
  }
}

Status KvCacheManager::check_invariants() const {
  if (Status s = pool_.check_invariants(); !s.ok()) return s;
  if (Status s = pins_.check_invariants(); !s.ok()) return s;
  std::vector<int32_t> refs(pool_.num_blocks(), 0);
  pins_.count_refs(&refs);
  for (const auto& [id, table] : tables_) {
    if (table.hashes.size() > table.blocks.size()) {
      return Status::internal("request " + std::to_string(id) + " has more hashes than blocks");
    }
    for (BlockId b : table.blocks) {
      if (b == kNoBlock) continue;
      if (b < 0 || b >= pool_.num_blocks()) {
        return Status::internal("request " + std::to_string(id) + " holds bad block " +
                                std::to_string(b));
      }
      ++refs[b];
    }
  }
  for (BlockId b = 0; b < pool_.num_blocks(); ++b) {
    if (refs[b] != pool_.ref_count(b)) {
      return Status::internal("block " + std::to_string(b) + " has ref count " +
                              std::to_string(pool_.ref_count(b)) + " but " +
                              std::to_string(refs[b]) + " tables and pins hold it");
    }
  }
  return Status::ok_status();
}

}  // namespace keel::kv
