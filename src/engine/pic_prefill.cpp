// compile_chunk and pic_prefill (see pic_prefill.h).
#include "engine/pic_prefill.h"

#include <algorithm>

#include "model/kv_relocate.h"

namespace keel::engine {
namespace {

// Runs `positions` (ascending) of one sequence through the model in pieces of the Context's batch
// size; logits of the last position when `logits` is not null.
Status forward_positions(model::Context& ctx, model::KvStorage& kv, kernels::Ops& ops,
                         std::span<const int32_t> tokens, std::span<const int32_t> positions,
                         std::span<const int32_t> table, std::vector<float>* logits) {
  const auto piece = static_cast<size_t>(ctx.max_batch_tokens());
  for (size_t i = 0; i < positions.size(); i += piece) {
    model::Batch b;
    const int32_t seq = b.add_seq(std::vector<int32_t>(table.begin(), table.end()));
    const size_t end = std::min(positions.size(), i + piece);
    for (size_t j = i; j < end; ++j) {
      const int32_t p = positions[j];
      b.add(tokens[static_cast<size_t>(p)], p, seq, logits != nullptr && j + 1 == positions.size());
    }
    KEEL_TRY(ctx.forward(b, kv, ops, end == positions.size() ? logits : nullptr));
  }
  return Status();
}

std::vector<int32_t> iota(int32_t a, int32_t b) {
  std::vector<int32_t> v;
  for (int32_t p = a; p < b; ++p) v.push_back(p);
  return v;
}

}  // namespace

Status compile_chunk(model::Context& ctx, model::KvStorage& kv, kernels::Ops& ops,
                     std::span<const int32_t> tokens, std::span<const int32_t> table,
                     std::vector<float>* logits) {
  const std::vector<int32_t> positions = iota(0, static_cast<int32_t>(tokens.size()));
  return forward_positions(ctx, kv, ops, tokens, positions, table, logits);
}

Status pic_prefill(const model::Model& model, model::Context& ctx, model::KvStorage& kv,
                   kernels::Ops& ops, std::span<const int32_t> tokens,
                   std::span<const kv::PicChunk> chunks,
                   std::span<const std::vector<int32_t>> chunk_tables,
                   std::span<const int32_t> table, const kv::PicVariant& variant,
                   std::vector<float>* logits, PicPrefillStats* stats) {
  const auto n = static_cast<int32_t>(tokens.size());
  if (n == 0) return Status::invalid_argument("the prompt is empty");
  KEEL_TRY(kv::validate_pic_chunks(chunks, n));
  if (chunk_tables.size() != chunks.size()) {
    return Status::invalid_argument("one compiled table per chunk is needed");
  }
  kv::PicLinkPlan plan = kv::plan_pic_link(n, 0, chunks, variant);
  const int32_t bs = kv.layout().block_size;
  // The linked rows are copied (CacheBlend's candidates among them: its probe compares them).
  std::vector<model::KvRowMove> moves;
  size_t c = 0;
  for (int32_t p : plan.linked) {
    while (chunks[c].start + chunks[c].len <= p) ++c;
    const int32_t j = p - chunks[c].start;
    moves.push_back({chunk_tables[c][static_cast<size_t>(j / bs)], j % bs,
                     table[static_cast<size_t>(p / bs)], p % bs, chunks[c].start});
  }
  model::move_kv_rows(model.hparams(), kv, ops, moves);
  if (variant.mode == kv::PicMode::kCacheBlend && !plan.blend_candidates.empty()) {
    // The probe runs layer 0 over every position before L in context, then compares layer-1 V.
    const std::vector<int32_t> all = iota(0, plan.linked_end);
    std::vector<float> deviation_all;
    model::Batch b;
    const int32_t seq = b.add_seq(std::vector<int32_t>(table.begin(), table.end()));
    for (int32_t p : all) b.add(tokens[static_cast<size_t>(p)], p, seq, false);
    if (static_cast<int64_t>(all.size()) > ctx.max_batch_tokens()) {
      return Status::invalid_argument("CacheBlend's probe needs one batch for the linked prompt");
    }
    KEEL_TRY(ctx.value_deviation(b, kv, ops, kCacheBlendCheckLayer, &deviation_all));
    std::vector<float> deviation;
    for (int32_t p : plan.blend_candidates)
      deviation.push_back(deviation_all[static_cast<size_t>(p)]);
    kv::recompute_also(&plan,
                       kv::select_by_deviation(plan.blend_candidates, deviation, variant.percent));
  }
  std::vector<int32_t> positions = plan.recompute;
  for (int32_t p = plan.linked_end; p < n; ++p) positions.push_back(p);
  if (stats != nullptr) {
    stats->linked = static_cast<int32_t>(plan.linked.size());
    stats->recomputed = static_cast<int32_t>(positions.size());
  }
  return forward_positions(ctx, kv, ops, tokens, positions, table, logits);
}

}  // namespace keel::engine
