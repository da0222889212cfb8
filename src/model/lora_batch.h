// LoraBatch: the LoRA side of one forward pass over a batch whose sequences may each use another
// adapter (BatchSeq::lora) — S-LoRA/Punica-style segmented low-rank matmuls. bind() groups the
// batch's tokens by adapter; after each targeted base matmul the Context asks it to add, for the
// rows of each group, scale·B·(A·x) of that group's adapter: the groups' input rows are gathered
// once, then one pool job runs every (group, target) pair — each on one thread, through a
// single-threaded Ops of that thread (A·x, scale, B·(A·x), scatter-add into the group's rows;
// pairs never write the same rows). Tokens without an adapter, and every batch with none, cost
// nothing beyond bind().
//
// Invariants: between bind() and the end of the pass, every adapter a group points to is alive
// (the engine holds it per request). Thread safety: one per Context (its scratch); called on the
// Context's thread, it runs jobs on the pool of the Ops it is given (always the same one).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/batch.h"
#include "model/lora_adapter.h"

namespace keel::model {

class LoraBatch {
 public:
  LoraBatch();
  ~LoraBatch();
  LoraBatch(const LoraBatch&) = delete;
  LoraBatch& operator=(const LoraBatch&) = delete;

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
    size_t first_row = 0;         // its rows in in_: [first_row, first_row + tokens.size())
  };
  // One pool thread's single-threaded Ops and scratch.
  struct Worker {
    std::unique_ptr<ThreadPool> pool;  // of one thread: the caller
    std::unique_ptr<kernels::Ops> ops;
    std::vector<float> low;    // [n_group][rank]  A·x
    std::vector<float> delta;  // [n_group][out]   B·(A·x)
  };
  // Copies every group's rows of `src` ([n_tokens][cols]) into `dst`, group after group.
  void gather(const float* src, int64_t cols, std::vector<float>* dst) const;
  // Lists in items_ the (group, target) pairs of layer il that have an adapter matrix; false
  // when there are none.
  bool plan(int64_t il, std::span<const LoraTarget> targets);
  // Adds every planned pair's delta into outs[i] (i: the pair's index into targets), as one job
  // over in_ (the gathered inputs, `cols` wide).
  void run(int64_t il, std::span<const LoraTarget> targets, int64_t cols,
           std::span<float* const> outs, kernels::Ops& ops);

  std::vector<Group> groups_;  // one per distinct adapter in the batch
  size_t num_rows_ = 0;        // adapted tokens (rows of in_)
  std::vector<float> in_;      // [num_rows_][cols] gathered input rows
  std::vector<float> in2_;     // [num_rows_][cols] second gathered input (up)
  std::vector<Worker> workers_;
  struct Item {
    size_t group;
    size_t target;  // index into the call's targets
  };
  std::vector<Item> items_;
};

}  // namespace keel::model
