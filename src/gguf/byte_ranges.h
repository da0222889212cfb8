// ByteRange: a span of a GGUF file's tensor data section (offsets from the section's start, like
// TensorInfo::offset), and the set operations a partial read needs: normalising a list into
// sorted disjoint ranges, subtracting one set from another, and the complement within a size.
// Used by ReadOptions::skip (reader.h) and the expert shard's skip list (model/expert_shard.h).
//
// Thread safety: plain data and pure functions.
#pragma once

#include <cstdint>
#include <vector>

namespace keel::gguf {

struct ByteRange {
  uint64_t offset = 0;  // from the start of the data section
  uint64_t bytes = 0;   // length; 0 = empty (ignored by every function below)

  [[nodiscard]] uint64_t end() const { return offset + bytes; }
  friend bool operator==(const ByteRange&, const ByteRange&) = default;
};

// `ranges` sorted by offset, empty ones dropped, overlapping or touching ones merged: sorted,
// disjoint and non-adjacent. Each range's end must not overflow 64 bits.
[[nodiscard]] std::vector<ByteRange> normalize_ranges(std::vector<ByteRange> ranges);

// The bytes of `from` that are in no range of `minus` (both normalised first); normalised.
[[nodiscard]] std::vector<ByteRange> subtract_ranges(const std::vector<ByteRange>& from,
                                                     const std::vector<ByteRange>& minus);

// The bytes of [0, size) in no range of `ranges`; normalised.
[[nodiscard]] std::vector<ByteRange> complement_ranges(const std::vector<ByteRange>& ranges,
                                                       uint64_t size);

// Total bytes of `ranges` (overlaps counted twice: normalise first for the covered size).
[[nodiscard]] uint64_t total_bytes(const std::vector<ByteRange>& ranges);

}  // namespace keel::gguf
