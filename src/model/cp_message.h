// The messages context-parallel members pass around their ring (context_parallel.h), versioned
// and checked on receipt:
//   - a KV shard: one layer's K and V rows of a member's slots, with their global positions, laid
//     out as blocks of a one-layer KvStorage (per block: block_size K rows, then block_size V
//     rows, in the storage's dtype), so the receiver attends over the message in place;
//   - an attention state: a member's partial attention rows of the step's queries, with each
//     row's running max and sum per head (PagedQueries::state_m / state_l);
//   - token ids (a sampled token passed on).
// Layout: a 64-byte header (magic "KCP1", version, kind, sizes), then int32 positions padded to
// 64 bytes, then the payload. A message that does not match what the receiver expects (kind,
// layer, dtype, sizes) is Corrupt, naming the field.
//
// Thread safety: pure functions over immutable bytes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"
#include "kernels/kernels.h"
#include "model/context_parallel.h"
#include "model/kv_storage.h"

namespace keel::model {

inline constexpr uint32_t kCpMessageVersion = 1;

// Layer `layer` of the slots [0, positions.size()) of a member whose slots live in `table`.
CpMessage pack_kv_shard(const KvStorage& kv, int64_t layer, std::span<const int32_t> table,
                        std::span<const int32_t> positions);

// A received KV shard: positions and a kernel view of its rows (block ids 0, 1, … in order).
struct CpKvShard {
  std::span<const int32_t> positions;
  kernels::PagedKv kv;
  int32_t n_blocks = 0;
};
// Checks `msg` is a KV shard of `layer` in `layout`'s row format (its n_layer is ignored).
Result<CpKvShard> view_kv_shard(const CpMessage& msg, const KvLayout& layout, int64_t layer);

// A member's partial attention of n_q query rows: acc [n_q][n_heads·head_dim], m and l
// [n_q][n_heads].
struct CpStateView {
  int64_t n_q = 0;
  int64_t n_heads = 0;
  int64_t head_dim = 0;
  const float* acc = nullptr;
  const float* m = nullptr;
  const float* l = nullptr;
};
CpMessage pack_attention_state(int64_t layer, const CpStateView& state);
// Checks `msg` is the state of `layer` with the expected sizes and returns views into it.
Result<CpStateView> view_attention_state(const CpMessage& msg, int64_t layer, int64_t n_q,
                                         int64_t n_heads, int64_t head_dim);

// A few token ids (a member passing on the token it sampled, for members that did not compute
// its logits).
CpMessage pack_tokens(std::span<const int32_t> tokens);
Result<std::vector<int32_t>> view_tokens(const CpMessage& msg);

}  // namespace keel::model
