// KvPins implementation (see kv_pins.h). Thread safety: none; engine thread only.
#include "kv/kv_pins.h"

#include <algorithm>
#include <limits>
#include <string>
#include <unordered_set>

namespace keel::kv {

std::string_view pin_release_name(PinRelease r) {
  switch (r) {
    case PinRelease::kTtl:
      return "ttl";
    case PinRelease::kCap:
      return "cap";
    case PinRelease::kSubsumed:
      return "subsumed";
    case PinRelease::kReleased:
      return "released";
    case PinRelease::kPressure:
      return "pressure";
  }
  return "?";
}

size_t KvPins::room_for(const std::string& tenant, size_t n) const {
  n = std::min(n, static_cast<size_t>(limits_.max_blocks));
  if (!tenant.empty() && limits_.max_blocks_per_tenant > 0) {
    n = std::min(n, static_cast<size_t>(limits_.max_blocks_per_tenant));
  }
  return n;
}

std::vector<BlockId> KvPins::add(PinId id, const std::string& tenant,
                                 std::span<const BlockId> blocks, int64_t now_ns,
                                 std::vector<ReleasedPin>* released) {
  if (!limits_.enabled() || blocks.empty() || seq_of_.contains(id)) return {};
  Pin pin{id, tenant, {}, now_ns + limits_.ttl_ns};
  pin.blocks.assign(blocks.begin(),
                    blocks.begin() + static_cast<std::ptrdiff_t>(room_for(tenant, blocks.size())));
  BlockRefs& mine = tenant_refs_[tenant];
  for (BlockId b : pin.blocks) {
    ++refs_[b];
    ++mine[b];
  }
  ++num_added_;
  const uint64_t seq = next_seq_++;
  seq_of_[id] = seq;
  const Pin& newest = pins_.emplace(seq, std::move(pin)).first->second;
  release_subsumed(newest, released);
  if (!tenant.empty() && limits_.max_blocks_per_tenant > 0) {
    release_oldest(
        id, &tenant, [&] { return tenant_blocks(tenant) > limits_.max_blocks_per_tenant; },
        released);
  }
  release_oldest(
      id, nullptr, [&] { return num_blocks() > limits_.max_blocks; }, released);
  return newest.blocks;  // the newest pin never gives way to itself
}

void KvPins::release_subsumed(const Pin& newest, std::vector<ReleasedPin>* released) {
  const std::unordered_set<BlockId> held(newest.blocks.begin(), newest.blocks.end());
  for (auto it = pins_.begin(); it != pins_.end() && it->second.id != newest.id;) {
    const Pin& p = it->second;
    const bool covered =
        p.tenant == newest.tenant &&
        std::all_of(p.blocks.begin(), p.blocks.end(), [&](BlockId b) { return held.contains(b); });
    if (covered) {
      released->push_back(take(it++, PinRelease::kSubsumed));
    } else {
      ++it;
    }
  }
}

template <typename Over>
void KvPins::release_oldest(PinId keep, const std::string* tenant, Over over,
                            std::vector<ReleasedPin>* released) {
  for (auto it = pins_.begin(); it != pins_.end() && over();) {
    if (it->second.id == keep || (tenant != nullptr && it->second.tenant != *tenant)) {
      ++it;
      continue;
    }
    released->push_back(take(it++, PinRelease::kCap));
  }
}

ReleasedPin KvPins::take(std::map<uint64_t, Pin>::iterator it, PinRelease reason) {
  Pin& p = it->second;
  const auto mine = tenant_refs_.find(p.tenant);
  for (BlockId b : p.blocks) {
    if (--refs_[b] == 0) refs_.erase(b);
    if (--mine->second[b] == 0) mine->second.erase(b);
  }
  if (mine->second.empty()) tenant_refs_.erase(mine);
  ++num_released_[static_cast<size_t>(reason)];
  ReleasedPin out{p.id, std::move(p.blocks), reason};
  seq_of_.erase(p.id);
  pins_.erase(it);
  return out;
}

std::vector<ReleasedPin> KvPins::expire(int64_t now_ns) {
  std::vector<ReleasedPin> out;
  while (!pins_.empty() && pins_.begin()->second.deadline_ns <= now_ns) {
    out.push_back(take(pins_.begin(), PinRelease::kTtl));
  }
  return out;
}

std::optional<ReleasedPin> KvPins::release(PinId id) {
  const auto seq = seq_of_.find(id);
  if (seq == seq_of_.end()) return std::nullopt;
  return take(pins_.find(seq->second), PinRelease::kReleased);
}

std::vector<ReleasedPin> KvPins::release_all() {
  std::vector<ReleasedPin> out;
  while (!pins_.empty()) out.push_back(take(pins_.begin(), PinRelease::kReleased));
  return out;
}

std::optional<ReleasedPin> KvPins::release_oldest() {
  if (pins_.empty()) return std::nullopt;
  return take(pins_.begin(), PinRelease::kPressure);
}

std::optional<int64_t> KvPins::next_deadline_ns() const {
  if (pins_.empty()) return std::nullopt;
  return pins_.begin()->second.deadline_ns;
}

int32_t KvPins::tenant_blocks(std::string_view tenant) const {
  const auto it = tenant_refs_.find(std::string(tenant));
  return it == tenant_refs_.end() ? 0 : static_cast<int32_t>(it->second.size());
}

std::map<std::string, int32_t> KvPins::blocks_by_tenant() const {
  std::map<std::string, int32_t> out;
  for (const auto& [tenant, refs] : tenant_refs_) {
    if (!tenant.empty()) out.emplace(tenant, static_cast<int32_t>(refs.size()));
  }
  return out;
}

void KvPins::count_refs(std::vector<int32_t>* refs) const {
  for (const auto& [seq, pin] : pins_) {
    for (BlockId b : pin.blocks) ++(*refs)[static_cast<size_t>(b)];
  }
}

Status KvPins::check_invariants() const {
  BlockRefs refs;
  std::unordered_map<std::string, BlockRefs> tenant_refs;
  int64_t deadline = std::numeric_limits<int64_t>::min();
  for (const auto& [seq, pin] : pins_) {
    const std::string name = "pin " + std::to_string(pin.id);
    const auto s = seq_of_.find(pin.id);
    if (s == seq_of_.end() || s->second != seq) return Status::internal(name + " is not indexed");
    if (pin.blocks.empty()) return Status::internal(name + " holds no block");
    if (pin.deadline_ns < deadline) return Status::internal(name + " expires out of order");
    deadline = pin.deadline_ns;
    const std::unordered_set<BlockId> distinct(pin.blocks.begin(), pin.blocks.end());
    if (distinct.size() != pin.blocks.size()) return Status::internal(name + " repeats a block");
    for (BlockId b : pin.blocks) {
      ++refs[b];
      ++tenant_refs[pin.tenant][b];
    }
  }
  if (seq_of_.size() != pins_.size()) return Status::internal("the pin index has stale ids");
  if (refs != refs_ || tenant_refs != tenant_refs_) {
    return Status::internal("the pinned-block counts do not match the pins");
  }
  if (limits_.enabled() && num_blocks() > limits_.max_blocks) {
    return Status::internal(std::to_string(num_blocks()) + " blocks pinned, over the cap of " +
                            std::to_string(limits_.max_blocks));
  }
  for (const auto& [tenant, held] : tenant_refs_) {
    if (!tenant.empty() && limits_.max_blocks_per_tenant > 0 &&
        static_cast<int32_t>(held.size()) > limits_.max_blocks_per_tenant) {
      return Status::internal("tenant " + tenant + " pins " + std::to_string(held.size()) +
                              " blocks, over its cap");
    }
  }
  return Status::ok_status();
}

}  // namespace keel::kv
