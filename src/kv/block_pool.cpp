// BlockPool implementation (see block_pool.h). Thread safety: none; engine thread only.
#include "kv/block_pool.h"

#include <string>

#include "core/check.h"

namespace keel::kv {

BlockPool::BlockPool(int32_t num_blocks)
    : prev_(num_blocks + 1), next_(num_blocks + 1), ref_(num_blocks, 0), hashes_(num_blocks) {
  KEEL_CHECK(num_blocks >= 0);
  const int32_t sentinel = num_blocks;
  prev_[sentinel] = next_[sentinel] = sentinel;
  for (BlockId b = 0; b < num_blocks; ++b) link_tail(b);
}

void BlockPool::check_id(BlockId b) const {
  KEEL_CHECK_MSG(b >= 0 && b < num_blocks(), "block id out of range");
}

void BlockPool::link_head(BlockId b) {
  const int32_t s = num_blocks();
  prev_[b] = s;
  next_[b] = next_[s];
  prev_[next_[s]] = b;
  next_[s] = b;
  ++num_free_;
}

void BlockPool::link_tail(BlockId b) {
  const int32_t s = num_blocks();
  next_[b] = s;
  prev_[b] = prev_[s];
  next_[prev_[s]] = b;
  prev_[s] = b;
  ++num_free_;
}

void BlockPool::unlink(BlockId b) {
  next_[prev_[b]] = next_[b];
  prev_[next_[b]] = prev_[b];
  prev_[b] = next_[b] = b;
  --num_free_;
}

std::optional<BlockId> BlockPool::take_free() {
  if (num_free_ == 0) return std::nullopt;
  const BlockId b = next_[num_blocks()];
  unlink(b);
  if (record_evictions_ && hashes_[b].has_value()) evictions_.push_back({b, *hashes_[b]});
  unpublish(b);  // evict: its contents are about to be overwritten
  ref_[b] = 1;
  return b;
}

void BlockPool::acquire(BlockId b) {
  check_id(b);
  if (ref_[b] == 0) unlink(b);
  ++ref_[b];
}

void BlockPool::release(BlockId b) {
  check_id(b);
  KEEL_CHECK_MSG(ref_[b] > 0, "release of a free block");
  if (--ref_[b] > 0) return;
  if (hashes_[b].has_value()) {
    link_tail(b);
  } else {
    link_head(b);
  }
}

int32_t BlockPool::ref_count(BlockId b) const {
  check_id(b);
  return ref_[b];
}

std::optional<BlockId> BlockPool::lookup(const BlockHash& h) const {
  const auto it = index_.find(h);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

const BlockHash* BlockPool::hash_of(BlockId b) const {
  check_id(b);
  return hashes_[b].has_value() ? &*hashes_[b] : nullptr;
}

bool BlockPool::publish(BlockId b, const BlockHash& h) {
  check_id(b);
  KEEL_CHECK_MSG(ref_[b] > 0, "publish of a free block");
  KEEL_CHECK_MSG(!hashes_[b].has_value(), "publish of a block that already has a hash");
  if (!index_.emplace(h, b).second) return false;
  hashes_[b] = h;
  return true;
}

void BlockPool::unpublish(BlockId b) {
  check_id(b);
  if (!hashes_[b].has_value()) return;
  if (event_log_ != nullptr) event_log_->removed(*hashes_[b]);
  index_.erase(*hashes_[b]);
  hashes_[b].reset();
}

void BlockPool::clear_index() {
  if (event_log_ != nullptr) event_log_->cleared();
  index_.clear();
  for (auto& h : hashes_) h.reset();
}

std::vector<BlockId> BlockPool::free_list() const {
  std::vector<BlockId> out;
  out.reserve(num_free_);
  for (int32_t b = next_[num_blocks()]; b != num_blocks(); b = next_[b]) out.push_back(b);
  return out;
}

Status BlockPool::check_invariants() const {
  const int32_t n = num_blocks();
  std::vector<uint8_t> on_list(n, 0);
  int32_t count = 0;
  int32_t prev = n;
  for (int32_t b = next_[n]; b != n; prev = b, b = next_[b]) {
    if (b < 0 || b >= n || on_list[b] || prev_[b] != prev || count > n) {
      return Status::internal("free list is corrupt at block " + std::to_string(b));
    }
    on_list[b] = 1;
    ++count;
  }
  if (count != num_free_) {
    return Status::internal("free list has " + std::to_string(count) + " blocks, num_free is " +
                            std::to_string(num_free_));
  }
  int32_t used = 0;
  for (BlockId b = 0; b < n; ++b) {
    if (ref_[b] < 0) return Status::internal("negative ref count on block " + std::to_string(b));
    if ((ref_[b] == 0) != (on_list[b] == 1)) {
      return Status::internal("block " + std::to_string(b) + " has ref count " +
                              std::to_string(ref_[b]) + " but is " + (on_list[b] ? "" : "not ") +
                              "on the free list");
    }
    if (ref_[b] > 0) ++used;
    if (hashes_[b].has_value()) {
      const auto it = index_.find(*hashes_[b]);
      if (it == index_.end() || it->second != b) {
        return Status::internal("block " + std::to_string(b) + " has a hash the index lacks");
      }
    }
  }
  if (used + num_free_ != n) return Status::internal("num_free + used != num_blocks");
  for (const auto& [h, b] : index_) {
    if (b < 0 || b >= n || !hashes_[b].has_value() || !(*hashes_[b] == h)) {
      return Status::internal("index entry for block " + std::to_string(b) + " is stale");
    }
  }
  return Status::ok_status();
}

}  // namespace keel::kv

namespace keel::kv {

std::vector<EvictedCachedBlock> BlockPool::take_evictions() {
  std::vector<EvictedCachedBlock> out;
  out.swap(evictions_);
  return out;
}

}  // namespace keel::kv
