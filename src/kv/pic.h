// Position-independent caching (EPIC): which prompt positions a link fills from chunk caches and
// which it recomputes in context. Pure functions over positions; the engine and `keel eval pic`
// perform the copies (model::move_kv_rows) and the recompute forward.
//
// A PicChunk is a span of prompt tokens (usually starting with the chunk's own BOS) whose KV was
// computed alone at chunk-local positions 0..len-1 ("compile"). Linking a prompt of n tokens whose
// first `hit` positions are exact already (prefix cache) gives:
//   - linked_end L = min(end of the last chunk, n − 1): positions [L, n) are computed normally
//     afterwards (the query; at least the last token, for the logits);
//   - recompute: positions in [hit, L) computed in context, attending causally to everything
//     before them — the gaps between chunks (text that is not a chunk), plus the variant's choice;
//   - linked: the chunk positions in [hit, L) not recomputed, copied from the chunk caches with K
//     re-rotated.
// Variants: full (nothing linked: L = hit), naive (k = 0: gaps only), LegoLink-k (the first k
// tokens of every chunk that does not start at position 0), CacheBlend-r% (gaps, plus the r% of
// linked positions whose layer-1 V deviates most: select_by_deviation after a probe).
//
// Thread safety: pure functions and plain values.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace keel::kv {

enum class PicMode { kFull, kNaive, kLegoLink, kCacheBlend };

struct PicVariant {
  PicMode mode = PicMode::kLegoLink;
  int32_t k = 16;        // LegoLink-k: tokens recomputed at the start of each non-leading chunk
  int32_t percent = 15;  // CacheBlend-r: percent of linked tokens recomputed
  // "full", "naive", "legolink-K", "cacheblend-R".
  [[nodiscard]] std::string name() const;
  // Parses name(); InvalidArgument with the accepted forms otherwise (k in [0, 4096], r in
  // [0, 100]; legolink-0 is naive).
  static Result<PicVariant> parse(std::string_view text);
  friend bool operator==(const PicVariant&, const PicVariant&) = default;
};

struct PicChunk {
  int32_t start = 0;  // first prompt position
  int32_t len = 0;    // ≥ 1
  friend bool operator==(const PicChunk&, const PicChunk&) = default;
};

// InvalidArgument unless chunks are ascending, non-overlapping, non-empty and inside [0, n).
Status validate_pic_chunks(std::span<const PicChunk> chunks, int32_t n);

struct PicLinkPlan {
  int32_t linked_end = 0;          // L
  std::vector<int32_t> linked;     // positions copied from chunk caches, ascending
  std::vector<int32_t> recompute;  // positions in [hit, L) recomputed in context, ascending
  // CacheBlend: the linked positions a probe may pick from (those of non-leading chunks).
  std::vector<int32_t> blend_candidates;
};

// The link of a prompt of n tokens (n ≥ 1) with `hit` exact positions (0 ≤ hit < n) and valid
// chunks. CacheBlend's extra positions are not chosen here (see select_by_deviation).
PicLinkPlan plan_pic_link(int32_t n, int32_t hit, std::span<const PicChunk> chunks,
                          const PicVariant& variant);

// CacheBlend: the ceil(percent% of positions.size()) positions with the largest deviation (ties
// by position), ascending. deviation is parallel to positions.
std::vector<int32_t> select_by_deviation(std::span<const int32_t> positions,
                                         std::span<const float> deviation, int32_t percent);

// Moves the chosen positions from plan->linked to plan->recompute (both stay ascending).
void recompute_also(PicLinkPlan* plan, std::span<const int32_t> positions);
// The union of two ascending position lists, ascending.
std::vector<int32_t> merge_positions(std::span<const int32_t> a, std::span<const int32_t> b);

}  // namespace keel::kv
