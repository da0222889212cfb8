// The store's eviction rule as a pure function: which entries to remove so a new one fits in the
// memory budget — least recently used first, never a pinned one (an entry someone asked to keep,
// e.g. the one being bound).
//
// Thread safety: pure function.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace keel::store {

struct EntryUse {
  std::string name;         // the entry's file name
  uint64_t bytes = 0;       // its size
  int64_t last_use_ns = 0;  // when it was last built or mapped (any clock, compared only)
  bool pinned = false;      // never chosen
};

// Indices into `entries` to remove, least recently used first, so that the remaining bytes plus
// `incoming` fit in `budget_bytes` (0 = no budget: nothing is removed). nullopt when removing every
// unpinned entry is not enough (or `incoming` alone exceeds the budget).
[[nodiscard]] std::optional<std::vector<size_t>> choose_evictions(
    const std::vector<EntryUse>& entries, uint64_t budget_bytes, uint64_t incoming);

}  // namespace keel::store
