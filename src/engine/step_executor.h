// StepExecutor: runs one step's forward pass and sampling on its own thread (which owns the
// compute thread pool), so the engine thread can plan the next step meanwhile. One step at a
// time: launch() then wait().
//
// Thread safety: launch() and wait() are called by the engine thread only. While a step runs,
// the executor reads the KV storage and the samplers named in its input; the engine must not
// touch or destroy those until wait() returns.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "core/thread_pool.h"
#include "draft/draft_head.h"
#include "draft/draft_model_runner.h"
#include "draft/exit_predictor.h"
#include "engine/pipeline_tail.h"
#include "engine/sparse_decode.h"
#include "engine/types.h"
#include "kernels/kernels.h"
#include "model/batch.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "model/model.h"
#include "sampling/draft_verify.h"
#include "sampling/sampler.h"

namespace keel::engine {

struct StepInput {
  model::Batch batch;
  // One entry per sampling seq, in batch order: it takes drafts.size() + 1 consecutive logits
  // rows (tokens with logits = 1) — one row, or a speculative verification's rows.
  struct Sample {
    RequestKey key;
    sampling::Sampler* sampler;  // owned by the engine; alive until wait() returns
    std::vector<int32_t>
        drafts;  // the seq's drafted tokens (sampling/draft_verify.h); usually none
    // Draft-head speculation: after sampling, the draft head drafts this many tokens after the
    // last emitted one, from the target's hidden state of the row that emitted it
    // (StepOutput::proposals). 0 = none (the forward pass then keeps no hidden states).
    int32_t head_k = 0;
    // Draft-model speculation: after sampling, the draft model drafts this many tokens after the
    // last emitted one (StepOutput::proposals). 0 = none.
    int32_t model_k = 0;
    // With model_k > 0: the request's known tokens when the step was launched (prompt, then
    // generated; not the drafts being verified). The emitted tokens follow them.
    std::vector<int32_t> known_tokens;
    // SpecEE early exit (engine/early_exit_params.h): when `on`, the executor returns this
    // entry's feature (StepOutput::exits) and lets its rows exit at an active layer: a
    // single-token decode row without drafts whose previous feature is known (candidates from the
    // draft head, here), or every row of a verification whose candidates are given.
    struct EarlyExit {
      bool on = false;
      float threshold = 0.5f;
      std::vector<uint8_t> active;  // [n_layer] 1 = run the layer's predictor
      std::vector<float> feature;   // [n_embd] the previous position's feature; empty = none
      // A verification: [drafts.size() + 1][draft::kExitCandidates] the draft head's candidates
      // for each row, from the proposal its drafts came from (DraftHead::draft_with_candidates);
      // empty = its rows run full depth (n-gram drafts).
      std::vector<int32_t> candidates;
    } early_exit;
  };
  std::vector<Sample> samples;
  // CacheBlend's probe (one request; empty when none): run after the batch, through
  // model::Context::value_deviation at the check layer, in pieces of the batch size.
  model::Batch probe;
  RequestKey probe_key = 0;
  // Sparse decode: parallel to batch.seqs (all null = dense); the sequences are owned by the
  // engine and used by the executor only until wait() returns.
  std::vector<SparseSelector::Binding> sparse;
  // Pipeline parallelism: the copy-on-write copies made since the last step, mirrored to the
  // later stages before this step's batch (empty without a PipelineTail).
  std::vector<BlockCopy> block_copies;
};

struct StepOutput {
  Status status;  // a failed forward pass: no tokens
  struct Token {
    RequestKey key;
    int32_t token;
    std::optional<sampling::Logprobs> logprobs;  // when the sampler's params ask for them
  };
  // Per StepInput::samples entry, in order: one token, or a verification's accepted drafts then
  // the token after them.
  std::vector<Token> tokens;
  int64_t num_verified = 0;  // samples entries with drafts
  int64_t num_drafted = 0;   // their drafts
  int64_t num_accepted = 0;  // of which accepted
  // Per StepInput::samples entry with head_k > 0 or model_k > 0: the draft head's or the draft
  // model's tokens after the entry's last emitted token (Scheduler::propose_drafts); the head's
  // in samples order, then the draft model's.
  struct Proposal {
    RequestKey key;
    std::vector<int32_t> drafts;
    // With early exit on: [drafts.size() + 1][draft::kExitCandidates] the head's candidates at
    // each row of the verification these drafts make (StepInput::Sample::EarlyExit::candidates).
    std::vector<int32_t> candidates;
  };
  std::vector<Proposal> proposals;
  double draft_seconds = 0.0;  // of which the draft head and the draft model
  // Per StepInput::samples entry with early_exit.on, in order: per emitted token, the layer its
  // row's pass ended at (n_layer − 1 = full depth; empty when its rows could not exit: a
  // prefill, an n-gram verification) and the last emitted row's feature (the normed hidden state
  // the next step's candidates start from).
  struct Exit {
    RequestKey key;
    std::vector<int32_t> layers;
    std::vector<float> feature;
  };
  std::vector<Exit> exits;
  RequestKey probe_key = 0;
  std::vector<float> deviation;  // the probe's, per probe token (empty when it failed)
  double forward_seconds = 0.0;
};

class StepExecutor {
 public:
  // select_layer: where sparse decode chooses pages (sparse_select_layer()). draft_head: the
  // head samples with head_k > 0 draft with (borrowed, outlives the executor; null = none).
  // pipeline_tail: the later pipeline stages (borrowed, outlives the executor; null = this
  // executor runs every layer); with one, `storage` holds layers [0, tail->first_layer()) and
  // the step's forward pass is stage 0's layers then the tail (no early exit, probe or hidden
  // states — the engine refuses those features with a tail). expert_counts: an MoE model's
  // routing is counted there (borrowed, outlives the executor; null = not counted).
  // expert_parallel: an expert-parallel MoE model's remote experts (model/remote_experts.h).
  // draft_model: the runner samples with model_k > 0 draft with (borrowed, outlives the executor,
  // used by its thread only; null = none).
  StepExecutor(const model::Model& model, model::KvStorage* storage, kernels::Isa isa, int threads,
               int64_t max_batch_tokens, int64_t select_layer = 0,
               const draft::DraftHead* draft_head = nullptr,
               const draft::ExitPredictors* exit_predictors = nullptr,
               PipelineTail* pipeline_tail = nullptr,
               model::ExpertTokenCounts* expert_counts = nullptr,
               model::ExpertParallel expert_parallel = {},
               draft::DraftModelRunner* draft_model = nullptr);
  StepExecutor(const StepExecutor&) = delete;
  StepExecutor& operator=(const StepExecutor&) = delete;
  ~StepExecutor();

  void launch(StepInput input);
  StepOutput wait();
  [[nodiscard]] bool busy() const { return busy_; }

 private:
  void run();
  StepOutput execute(StepInput& input);
  // Samples every StepInput::samples entry from its logits rows (verifying drafts); with
  // `hidden` (the rows' features), drafts with the head for the entries that ask.
  void sample_all(StepInput& input, std::vector<float>& logits, const std::vector<float>& hidden,
                  const std::vector<int32_t>& row_exit, kernels::Ops& ops, StepOutput* out);
  // The draft model's proposals for `jobs` (each with its sequence's tokens, emitted ones
  // included) into out->proposals; a failure is logged and proposes nothing.
  void draft_with_model(std::vector<draft::DraftJob>& jobs, kernels::Ops& ops, StepOutput* out);
  // The step's forward pass: the plain one, or model::Context::forward_early_exit when a sample
  // asks for early exit (candidates from the draft head, or a verification's given ones).
  // *row_exit: per logits row, the layer its pass ended at, or -1 when the row could not exit
  // (empty when no sample asked).
  Status forward(model::Context& ctx, kernels::Ops& ops, const StepInput& input, bool want_hidden,
                 std::vector<float>* logits, std::vector<float>* hidden,
                 std::vector<int32_t>* row_exit);
  // Stage 0's layers then the tail (pipeline_tail_ set).
  Status forward_pipeline(model::Context& ctx, kernels::Ops& ops, const StepInput& input,
                          std::vector<float>* logits);
  Status run_probe(model::Context& ctx, kernels::Ops& ops, const model::Batch& probe,
                   std::vector<float>* deviation);

  const model::Model& model_;
  model::KvStorage* storage_;
  kernels::Isa isa_;
  int threads_;
  int64_t max_batch_tokens_;
  int64_t select_layer_;
  const draft::DraftHead* draft_head_;
  const draft::ExitPredictors* exit_predictors_;
  PipelineTail* pipeline_tail_;
  model::ExpertTokenCounts* expert_counts_;
  model::ExpertParallel expert_parallel_;
  draft::DraftModelRunner* draft_model_;
  std::vector<float> residual_;  // executor thread only: stage 0's output rows
  bool busy_ = false;            // engine thread only

  Mutex mu_;
  std::condition_variable cv_;
  std::optional<StepInput> input_ KEEL_GUARDED_BY(mu_);
  std::optional<StepOutput> output_ KEEL_GUARDED_BY(mu_);
  bool stop_ KEEL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace keel::engine
