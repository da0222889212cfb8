// Ops::Scratch: the per-Ops working memory that ops.cpp (matmul activations) and
// paged_attention.cpp (work units, partial results, per-thread kernel scratch) grow on demand and
// reuse across calls. Internal to the kernels module; owned by one Ops, so touched only by its
// owner thread, except that pool jobs write disjoint parts during a call.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/kernels.h"

namespace keel::kernels {

// One paged-attention work unit: the query heads of one KV head of a run of tokens of one sequence
// over a range of positions.
struct AttentionUnit {
  int32_t token = 0;  // the unit's first query token
  int32_t n_tok = 1;  // consecutive tokens of one sequence (≤ kQueryTile)
  int32_t kv_head = 0;
  int32_t kv_begin = 0;
  int32_t kv_end = 0;
  int32_t split = -1;  // index into the split items when the unit is one chunk of a split token
};

// A (token, KV head) whose positions were split into chunks: units [first_unit, + n_units).
struct AttentionSplit {
  int32_t first_unit = 0;
  int32_t n_units = 0;
  int32_t partial = 0;  // index of its first unit's partial accumulator
};

struct Ops::Scratch {
  // matmul (silu_mul_matmul_many: one part per matrix, laid end to end)
  std::vector<float> x;        // rounded activations (F16/BF16 weights)
  std::vector<uint16_t> x16;   // the same as raw bits
  std::vector<int8_t> qs;      // quantized activations
  std::vector<float> d;        // their block scales
  std::vector<int32_t> sum;    // Q8_0: Σq per block
  std::vector<int16_t> bsums;  // Q8_K: Σq per 16
  std::vector<float> rows;     // [threads][cols] fused matmuls' per-thread input row
  // paged_attention
  std::vector<AttentionUnit> units;
  std::vector<AttentionSplit> splits;
  std::vector<float> ml;       // [units][2·kQueryTile·group] each unit's rows' max, then sums
  std::vector<float> partial;  // [units of split tokens][group·head_dim] partial accumulators
  std::vector<float> thread;   // [threads][kernel scratch, then a chunk's acc, m and l]
  std::unique_ptr<std::atomic<int32_t>[]> pending;  // [splits] units left to finish
  size_t pending_size = 0;
};

template <typename T>
T* grow(std::vector<T>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}

}  // namespace keel::kernels
