// The fetch-vs-recompute decision of the relational tensor cache (DeepServe): reading a block
// from a tier costs latency + bytes × seconds-per-byte (measured at start-up per tier);
// recomputing it costs its tokens × the model's measured prefill seconds per token. A run of
// blocks after a pool hit must stay contiguous (the computed prefix has no holes), so the
// decision is where to cut the run: fetch blocks [0, cut), recompute the rest.
// Thread safety: plain values and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace keel::kv {

// Where a block's copy lives below the pool.
enum class TierKind { kNone, kHost, kDisk };

// The read cost of one tier: a read of n bytes takes latency_seconds + n · seconds_per_byte.
struct TierCost {
  double latency_seconds = 0.0;
  double seconds_per_byte = 0.0;
  [[nodiscard]] double read_seconds(size_t bytes) const {
    return latency_seconds + static_cast<double>(bytes) * seconds_per_byte;
  }
};

// The number of leading blocks of `where` (the tier of each block of a run, none kNone) worth
// fetching: the cut minimising Σ fetch time of blocks [0, cut) + (n − cut) · block_tokens ·
// prefill_seconds_per_token; ties go to fetching more. With prefill_seconds_per_token ≤ 0 (not
// measured yet) every block is fetched.
[[nodiscard]] int32_t blocks_to_fetch(std::span<const TierKind> where, const TierCost& host,
                                      const TierCost& disk, size_t block_bytes,
                                      int32_t block_tokens, double prefill_seconds_per_token);

// Tier T3, a peer engine's cache: one fetch of `cut` blocks costs link.latency_seconds once (one
// request) + cut · block_bytes · link.seconds_per_byte; recomputing them costs cut · block_tokens
// · prefill_seconds_per_token. The cut in [0, num_blocks] minimising fetch(cut) + recompute(rest)
// (ties fetch more). Both costs are linear in the cut, so the answer is 0 or num_blocks: the
// latency is paid once, so either fetching every block is worth it or none is. With
// prefill_seconds_per_token ≤ 0 (not measured yet) every block is fetched, as blocks_to_fetch.
[[nodiscard]] int32_t peer_blocks_to_fetch(int32_t num_blocks, const TierCost& link,
                                           size_t block_bytes, int32_t block_tokens,
                                           double prefill_seconds_per_token);

}  // namespace keel::kv
