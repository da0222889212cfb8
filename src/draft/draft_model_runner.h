// DraftModelRunner: the drafter of draft-model speculation (docs/speculative.md) — a small model
// with the target's vocabulary (draft/draft_model.h) that drafts k tokens greedily (its argmax)
// after each sequence's known tokens, batched over the sequences of a step: one forward pass
// catches every sequence up, then one pass per further draft position.
//
// It keeps a paged KV cache of its own per sequence (its own pool; the target's blocks are never
// touched): the rows of the tokens it last fed for that sequence — the known tokens and the
// drafts it fed itself. A call compares the sequence's tokens with those and recomputes from the
// first difference, so the rows of rejected drafts are rolled back (overwritten) and accepted
// drafts are reused without recomputing them. A sequence's state lives until release() or until
// its blocks are needed by a call that does not name it (least recently used first).
//
// Invariants: a sequence's rows [0, fed.size()) hold the draft's K/V of `fed`; its blocks cover
// them; every block is free or held by exactly one sequence.
// Thread safety: none; one thread calls it (the engine's step executor).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "kernels/kernels.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "model/model.h"

namespace keel::draft {

struct DraftModelConfig {
  int32_t block_size = 16;  // positions per block of the draft's KV pool
  int32_t num_blocks = 64;  // blocks in the pool (≥ 1)
  // The pool's element type: F32, F16 or Q8_0 (Q8_0 needs the draft's KV width to be a multiple
  // of 32; otherwise the pool is F32).
  DType kv_dtype = DType::kF32;
  int64_t max_batch_tokens = 512;  // tokens per forward pass of the draft (≥ 1)
};

// One sequence to draft for.
struct DraftJob {
  int64_t seq_id = 0;  // the sequence; its KV rows are kept under this id between calls
  // Every known token of the sequence (prompt, then generated), the last one just emitted: the
  // drafts follow it. Borrowed for the call.
  std::span<const int32_t> tokens;
  int32_t k = 0;                // drafts wanted
  std::vector<int32_t> drafts;  // out: up to k tokens
};

class DraftModelRunner {
 public:
  // `draft` must outlive the runner. InvalidArgument for a bad config, ResourceExhausted when the
  // pool cannot be allocated.
  static Result<std::unique_ptr<DraftModelRunner>> create(const model::Model& draft,
                                                          const DraftModelConfig& config);

  // Fills each job's drafts (at most one job per seq_id). A job gets fewer than k drafts — or
  // none — near the end of the draft's context, and none when its sequence would not fit in the
  // pool even with the blocks of every sequence this call does not name (its own rows are then
  // dropped). Error: a forward pass failed (then no job has drafts and the named sequences' rows
  // are dropped).
  Status draft(std::span<DraftJob> jobs, kernels::Ops& ops);

  // Drops a sequence's rows and frees its blocks (nothing when unknown).
  void release(int64_t seq_id);

  [[nodiscard]] const model::Model& model() const { return model_; }
  [[nodiscard]] int32_t num_free_blocks() const { return static_cast<int32_t>(free_.size()); }
  [[nodiscard]] size_t num_sequences() const { return seqs_.size(); }
  // Tokens fed to the draft model so far, catch-up and drafts (tests: reuse shows here).
  [[nodiscard]] int64_t num_fed_tokens() const { return num_fed_; }
  [[nodiscard]] size_t kv_bytes() const { return kv_.bytes(); }

 private:
  struct Seq {
    std::vector<int32_t> fed;     // tokens whose K/V rows [0, fed.size()) hold
    std::vector<int32_t> blocks;  // its block table
    uint64_t last_call = 0;       // the call that last named it (eviction order)
  };
  // One job's work in a call: positions [from, tokens.size()) to feed, then k − 1 drafts.
  struct Plan {
    DraftJob* job;
    Seq* seq;
    int32_t from;
    int32_t k;
  };

  DraftModelRunner(const model::Model& draft, const DraftModelConfig& config, model::KvStorage kv);
  // Gives `s` exactly `blocks` blocks, taking free ones and then those of the least recently
  // used sequences not named by this call; false (nothing dropped) when even all of those would
  // not be enough.
  bool hold_blocks(Seq& s, size_t blocks);
  void free_blocks(Seq& s);
  // Runs `batch` and appends the argmax of each logits row to its owner's drafts.
  Status run(const model::Batch& batch, const std::vector<Plan*>& owners, kernels::Ops& ops);
  Status catch_up(std::vector<Plan>& plans, kernels::Ops& ops);
  Status extend(std::vector<Plan>& plans, kernels::Ops& ops);

  const model::Model& model_;
  DraftModelConfig config_;
  model::KvStorage kv_;
  model::Context ctx_;
  std::unordered_map<int64_t, Seq> seqs_;
  std::vector<int32_t> free_;  // free block ids
  uint64_t call_ = 0;
  int64_t num_fed_ = 0;
  std::vector<float> logits_;
};

}  // namespace keel::draft
