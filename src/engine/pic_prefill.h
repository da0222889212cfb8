// One sequence's prefill through an EPIC link, computed directly on a Context (no scheduler):
// `keel eval pic` and the PIC tests use it; the engine performs the same steps through its plans
// (kv::plan_pic_link, model::move_kv_rows, recompute of scattered positions).
//   compile_chunk: a chunk's tokens alone at positions 0..len-1 into the chunk's own blocks (also
//                  a plain prompt prefill: keel eval sparse).
//   pic_prefill:   plan the link → copy the linked rows with K re-rotated → (CacheBlend: probe
//                  layer-1 V deviations over every linked position, add the top r%) → one forward
//                  over the recomputed positions and the tail [L, n) in position order, in pieces
//                  of at most the Context's batch size → logits of the last token.
// Variant full is a plain prefill of every token.
//
// Thread safety: none (uses the Context, the storage and the Ops given).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "kernels/kernels.h"
#include "kv/pic.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "model/model.h"

namespace keel::engine {

// CacheBlend's check layer (its code's default: the second layer).
inline constexpr int64_t kCacheBlendCheckLayer = 1;

// Computes `tokens` alone at positions 0..n-1 into `table`'s blocks (a chunk, or any prompt),
// in pieces of the Context's batch size; with `logits`, replaces it with the last token's.
Status compile_chunk(model::Context& ctx, model::KvStorage& kv, kernels::Ops& ops,
                     std::span<const int32_t> tokens, std::span<const int32_t> table,
                     std::vector<float>* logits = nullptr);

struct PicPrefillStats {
  int32_t linked = 0;      // positions copied from chunk caches
  int32_t recomputed = 0;  // positions computed (recompute set + tail; all of them for full)
};

// Prefills `tokens` into `table`'s blocks (positions 0..n-1) and replaces *logits with the last
// token's [n_vocab] logits. chunk_tables[i] holds chunk i compiled (compile_chunk). Errors: an
// invalid chunk list, or the Context's (a malformed batch).
Status pic_prefill(const model::Model& model, model::Context& ctx, model::KvStorage& kv,
                   kernels::Ops& ops, std::span<const int32_t> tokens,
                   std::span<const kv::PicChunk> chunks,
                   std::span<const std::vector<int32_t>> chunk_tables,
                   std::span<const int32_t> table, const kv::PicVariant& variant,
                   std::vector<float>* logits, PicPrefillStats* stats);

}  // namespace keel::engine
