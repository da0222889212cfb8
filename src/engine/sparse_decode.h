// Sparse decode in the forward pass (issue 6): SparseSequence is one request's state — its
// policy, the summaries of the pages it holds, the pages it decided to give back — and
// SparseSelector is the model::PageSelector that runs the policy at the selection layer of each
// decode step. Summaries are kept for that one layer: each step first folds the K rows of every
// position not folded yet (the prompt at the first decode step, afterwards the new token) read
// from the KV storage, then asks the policy, computes the attended pages' softmax mass for
// policies that observe it (H2O, RaaS), and records the releases. The caller (the engine, or
// keel eval sparse) applies releases to its block table after the step — never during it.
//
// Epochs: a request preempted and recomputed gets a new epoch (its preemption count); the first
// step of a new epoch starts the summaries over, and releases decided under an old epoch are
// dropped by the caller.
//
// Thread safety: a SparseSequence is used by one thread at a time (the executor during a step,
// the engine thread between steps).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "engine/types.h"
#include "model/page_selector.h"
#include "sparse/page_summary.h"
#include "sparse/sparse_policy.h"

namespace keel::engine {

struct SparseSequence {
  std::unique_ptr<sparse::SparsePolicy> policy;
  int32_t num_prompt_tokens = 0;           // pages holding prompt positions are prefill pages
  int32_t epoch = -1;                      // the preemption count the summaries were built under
  int32_t folded = 0;                      // positions [0, folded) are in the summaries
  int64_t step = 0;                        // decode steps taken (the policy's clock)
  std::vector<sparse::PageSummary> pages;  // held pages, ascending index
  std::vector<int32_t> released;           // pages given back so far (this epoch), ascending
  std::vector<int32_t> pending;            // released by the last step, not yet applied
  std::vector<int32_t> attended;           // the last step's pages
  int32_t max_pages_held = 0;              // the caller's measure of pool blocks held
  int64_t pages_released_total = 0;

  // The sequence's page for a decode token at `pos`: the held pages up to and including its own
  // (pages past the last folded one are new, hence held). For the layers before the selection.
  [[nodiscard]] std::vector<int32_t> held_pages(int32_t pos, int32_t page_size) const;
  // Marks `seq` — one decode token at `pos` — for page selection; once pages were released, the
  // layers before the selection attend only the held ones, and the released entries of its block
  // table (a snapshot that may predate the release) become kReleasedBlock holes.
  void prepare_decode(model::BatchSeq* seq, int32_t pos, int32_t page_size) const;
  // Starts over (a new epoch after a preemption).
  void reset(int32_t new_epoch);
};

// The policy a request runs, or nullptr for dense (no sparse state at all). InvalidArgument for
// an unknown policy or a bad budget. `tuning`: alpha, sink/window sizes, dense layers; page_size
// and budget are set here.
Result<std::unique_ptr<SparseSequence>> make_sparse_sequence(const SparseParams& params,
                                                             sparse::SparseConfig tuning,
                                                             int32_t page_size,
                                                             int32_t num_prompt_tokens);

// The layer whose queries choose the pages: the first one after the dense layers (the last layer
// when every layer would be dense).
int64_t sparse_select_layer(const sparse::SparseConfig& tuning, int64_t n_layer);

class SparseSelector final : public model::PageSelector {
 public:
  struct Binding {
    SparseSequence* seq = nullptr;  // null: the batch seq is dense
    int32_t epoch = 0;
  };
  // For a model of these hyper-parameters; keeps its scratch from step to step.
  explicit SparseSelector(const model::HParams& hp);
  // The sequences of the next forward pass: parallel to the batch's seqs. True when any is
  // sparse (the batch needs the selector).
  bool bind(std::vector<Binding> bindings);
  std::vector<int32_t> select(int32_t seq, const model::BatchSeq& s,
                              std::span<const int32_t> positions, std::span<const float> q,
                              const model::KvStorage& kv, int64_t layer) override;

 private:
  // Folds the K rows of positions [st.folded, last] at `layer` into the page summaries.
  void fold(SparseSequence& st, const model::BatchSeq& s, int32_t last, const model::KvStorage& kv,
            int64_t layer);
  // Per attended page: softmax probability mass of q over its positions up to `pos`, averaged
  // over the query heads.
  std::vector<float> attention_mass(const model::BatchSeq& s, std::span<const int32_t> pages,
                                    int32_t pos, std::span<const float> q,
                                    const model::KvStorage& kv, int64_t layer);

  std::vector<Binding> bindings_;
  sparse::QueryShape shape_;
  std::vector<float> row_;       // one dequantized K row
  std::vector<float> scores_;    // attention_mass's scores, then their exponentials
  std::vector<size_t> page_of_;  // attention_mass: the page of each attended position
};

// The engine's hooks around a step, for a request whose scheduler state has `epoch` preemptions.
// Before the step: the binding of its seq `seq` in the batch; `decode_pos` is the position of its
// one decode token (-1: the seq is a prefill chunk or recompute), which — past the prompt — is
// marked for page selection (prepare_decode; after a preemption the selector starts over).
SparseSelector::Binding bind_sparse_step(SparseSequence& st, int32_t epoch, int32_t decode_pos,
                                         int32_t page_size, model::BatchSeq* seq);
// After the step: records `held_blocks` (the pool blocks it holds) and takes the pages the step
// released, to give back to the pool — none when `valid` is false (the request was preempted
// since, or finished).
std::vector<int32_t> take_released_pages(SparseSequence& st, bool valid, int32_t held_blocks);

}  // namespace keel::engine
