// LoraBatch: the LoRA side of one forward pass over a batch whose sequences may each use another
// adapter (BatchSeq::lora) — S-LoRA/Punica-style segmented low-rank matmuls. bind() groups the
// batch's tokens by adapter; after each targeted base matmul the Context asks it to add, for the
// rows of each group, scale·B·(A·x) of that group's adapter (gathered rows → A → B → scaled
// scatter-add). Tokens without an adapter, and every batch with none, cost nothing beyond bind().
//
// Invariants: between bind() and the end of the pass, every adapter a group points to is alive
// (the engine holds it per request). Thread safety: one per Context (its scratch); runs on the
// Context's thread, parallelism through kernels::Ops.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/kernels.h"
#include "model/batch.h"
#include "model/lora_adapter.h"

namespace keel::model {

class LoraBatch {
 public:
  // Groups the batch's tokens by their sequence's adapter; returns active().
  bool bind(const Batch& batch);
  // Some token of the bound batch has an adapter.
  [[nodiscard]] bool active() const { return !groups_.empty(); }

  // Targets whose input is rms_norm(x) with `norm_weight` (q, k, v over attn_norm; gate, up over
  // ffn_norm): x is the residual stream [n_tokens][cols]; outs[i] ([n_tokens][that matrix's
  // rows]) gets target targets[i]'s delta added in the rows of adapted tokens.
  void add_normed(int64_t il, std::span<const LoraTarget> targets, const float* x,
                  const float* norm_weight, float eps, int64_t cols, std::span<float* const> outs,
                  kernels::Ops& ops);
  // A target whose input is `in` itself ([n_tokens][cols]; o over the attention output).
  void add(int64_t il, LoraTarget target, const float* in, int64_t cols, float* out,
           kernels::Ops& ops);
  // down over silu(gate)·up (both [n_tokens][cols]).
  void add_silu(int64_t il, const float* gate, const float* up, int64_t cols, float* out,
                kernels::Ops& ops);

 private:
  struct Group {
    const LoraAdapter* adapter = nullptr;
    std::vector<int32_t> tokens;  // batch token indices, ascending
  };
  // Copies the group's rows of `src` ([n_tokens][cols]) into in_ ([n_group][cols]).
  void gather(const Group& g, const float* src, int64_t cols, std::vector<float>* dst) const;
  // out rows of g's tokens += scale · B·(A·in_) for `target` (no-op when the layer lacks it).
  void apply(const Group& g, int64_t il, LoraTarget target, float* out, kernels::Ops& ops);
  // Whether g's adapter adapts any of `targets` in layer il.
  static bool adapts(const Group& g, int64_t il, std::span<const LoraTarget> targets);

  std::vector<Group> groups_;  // one per distinct adapter in the batch
  std::vector<float> in_;      // [n_group][cols] gathered input rows
  std::vector<float> in2_;     // [n_group][cols] second gathered input (up)
  std::vector<float> low_;     // [n_group][rank]  A·x
  std::vector<float> delta_;   // [n_group][out]   B·(A·x)
};

}  // namespace keel::model
