// ExpertShard: which of an MoE model's experts one process of an expert-parallel (EP) instance
// holds, and how its load reads and keeps only those. Shard i holds a contiguous range of each
// layer's n experts, expert e belonging to shard ⌊e · count / n⌋: in a 3-D expert tensor a
// shard's experts are one run of bytes, so a load that skips the others touches few pages of
// theirs (a round-robin split would interleave experts smaller than a 2 MiB huge page and bring
// every page in). The leader (shard 0) also holds everything that is not an expert — embeddings,
// attention, routers, a shared expert, the head; an expert member (experts_only) holds its experts
// alone. A shard may also hold replicas: extra copies of other shards' experts, chosen per layer
// (model/expert_placement.h, hot experts replicated EPLB-style); its load keeps their bytes too.
//
// A sharded load (ModelOptions::expert_shard) reads only the tensor bytes the shard keeps
// (gguf::ReadOptions::skip: untouched pages of the anonymous buffer are never resident), empties
// the views of the rest (apply_expert_shard) and regroups only the kept views, so a member's
// resident memory is about its experts' bytes.
//
// Thread safety: plain data and pure functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/status.h"
#include "gguf/reader.h"

namespace keel::model {

struct Weights;

struct ExpertShard {
  int32_t index = 0;          // this process's shard, in [0, count)
  int32_t count = 1;          // shards of the instance; 1 = every expert here
  bool experts_only = false;  // an expert member: no embeddings, attention, routers or head
  // Extra copies held here beyond the range: (layer, expert), sorted, none owned by this shard.
  std::vector<std::pair<int32_t, int32_t>> replicas;

  // The shard of `count` holding expert e of n_expert.
  [[nodiscard]] static int32_t owner(int64_t expert, int64_t n_expert, int32_t count) {
    return count <= 1 || n_expert <= 0 ? 0 : static_cast<int32_t>(expert * count / n_expert);
  }
  [[nodiscard]] bool owns(int64_t expert, int64_t n_expert) const {
    return count <= 1 || owner(expert, n_expert, count) == index;
  }
  // Whether this shard holds expert e of `layer`: its own, or a replica.
  [[nodiscard]] bool holds(int64_t layer, int64_t expert, int64_t n_expert) const {
    return owns(expert, n_expert) ||
           std::binary_search(replicas.begin(), replicas.end(),
                              std::pair{static_cast<int32_t>(layer), static_cast<int32_t>(expert)});
  }
  // Every tensor kept: an ordinary load.
  [[nodiscard]] bool whole() const { return count <= 1 && !experts_only; }
  // InvalidArgument unless 1 ≤ count ≤ 64, 0 ≤ index < count, experts_only only with index > 0
  // (the leader holds attention), and the replicas are sorted, distinct and non-negative. (Whether
  // a replica is in the model, or owned here, the load checks: it knows n_expert.)
  [[nodiscard]] Status validate() const;
};

// The byte ranges of `tensors` (offsets from the data section's start, as TensorInfo::offset) that
// a load for `shard` need not read: the experts it does not hold, in the 3-D `ffn_*_exps` and
// `ffn_gate_up_exps` tensors (each expert a contiguous slice) and the per-expert `ffn_*.E`
// tensors; with experts_only also every other tensor of two or more dimensions (vectors — one
// dimension once trailing 1s are dropped, as the loader reads shapes: norms, rope factors, the
// shared expert's gate — are always read: they are small and validated at load). Bytes that a
// kept tensor also views (GGUF lets tensors alias) are never skipped. Sorted, disjoint, merged.
// Empty when shard.whole().
[[nodiscard]] std::vector<gguf::ByteRange> expert_shard_skips(
    const std::vector<gguf::TensorInfo>& tensors, const ExpertShard& shard);

// Empties (kernels::Matrix{}: data null, rows 0) the matrix views `shard` does not keep: experts
// it does not hold (the banks keep their n_expert entries), and with experts_only every non-expert
// matrix (token_embd, output, attention, routers, the shared expert — so MoeWeights::has_shared()
// is false there). Vectors are kept. Nothing when shard.whole().
void apply_expert_shard(Weights& w, const ExpertShard& shard);

}  // namespace keel::model
