// Where a context-parallel group's positions go: pure functions, the same on every member.
//   - zigzag_split: a prefill's positions [begin, end) cut into 2N chunks of near-equal length
//     (the first (end - begin) % 2N chunks one longer); member i takes chunks i and 2N - 1 - i,
//     so causal attention's work — which grows along the sequence — is balanced (Meta's CP and
//     Striped/zig-zag ring attention).
//   - decode_owner: the member that stores a decode token's K/V: the one holding the fewest
//     positions (ties: the lowest rank), so shards stay within one token of each other.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace keel::cp {

// [N][…] each member's positions, ascending. n_members ≥ 1, begin ≤ end.
std::vector<std::vector<int32_t>> zigzag_split(int32_t begin, int32_t end, int n_members);

// shard_sizes: positions per member (≥ 1 member).
int decode_owner(std::span<const int64_t> shard_sizes);

}  // namespace keel::cp
