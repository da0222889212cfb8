// Context: the forward pass of a Model over a flat Batch, with per-engine scratch buffers sized
// once for a maximum batch. Data flow per call:
//   validate(batch) → embed → run_layers (attention block, FFN block per layer; K/V of all batch
//   tokens written to the KvCache before any token attends) → output norm + head for the tokens
//   that asked for logits → commit slot lengths.
// A batch that fails validation changes nothing (neither the cache nor the outputs).
//
// Thread safety: one Context per engine thread; the Model it borrows must outlive it and may be
// shared with other Contexts. Parallelism comes from kernels::Ops (its thread pool).
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "kernels/kernels.h"
#include "model/batch.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace keel::model {

class Context {
 public:
  // Scratch for batches of up to max_batch_tokens tokens (≥ 1). `model` must outlive this.
  Context(const Model& model, int64_t max_batch_tokens);

  [[nodiscard]] int64_t max_batch_tokens() const { return max_tokens_; }

  // Runs the batch, writing its K/V into `cache` (which must be shaped for the model) and, when
  // `logits` is not null, replacing *logits with [n_outputs][n_vocab] floats: one row per token
  // with logits[i] = 1, in batch order. Errors: InvalidArgument (malformed batch, token id out of
  // vocabulary, slot out of range, a gap in a slot's positions, too many tokens), OutOfRange
  // (position ≥ the cache's n_ctx).
  Status forward(const Batch& batch, KvCache& cache, kernels::Ops& ops, std::vector<float>* logits);

 private:
  Status validate(const Batch& batch, const KvCache& cache) const;
  void embed(const Batch& batch);
  // Every layer in order; the single place a per-layer hook (early exit) will go.
  void run_layers(const Batch& batch, KvCache& cache, kernels::Ops& ops);
  void attention_block(int64_t il, const Batch& batch, KvCache& cache, kernels::Ops& ops);
  void ffn_block(int64_t il, int64_t n_tokens, kernels::Ops& ops);
  // The KV cache access: store this layer's K/V rows, then attend over [0, pos] of each slot.
  void write_kv(int64_t il, const Batch& batch, KvCache& cache) const;
  void attend(int64_t il, const Batch& batch, KvCache& cache, kernels::Ops& ops);
  void output_logits(const Batch& batch, kernels::Ops& ops, std::vector<float>* logits);

  const Model& model_;
  const HParams& hp_;
  int64_t max_tokens_;
  // Scratch, each sized for max_tokens_ rows.
  std::vector<float> x_;     // [T][n_embd] residual stream
  std::vector<float> xn_;    // [T][n_embd] normalized input of a block; gathered output rows
  std::vector<float> q_;     // [T][q_dim]
  std::vector<float> k_;     // [T][kv_dim]
  std::vector<float> v_;     // [T][kv_dim]
  std::vector<float> attn_;  // [T][q_dim] attention output
  std::vector<float> proj_;  // [T][n_embd] block output before the residual add
  std::vector<float> gate_;  // [T][n_ff]
  std::vector<float> up_;    // [T][n_ff]
};

}  // namespace keel::model
