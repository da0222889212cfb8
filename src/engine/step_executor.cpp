// StepExecutor: a mailbox of one step between the engine thread and the executor thread.
#include "engine/step_executor.h"

#include "core/log.h"
#include "draft/exit_pass.h"
#include "engine/pic_prefill.h"

#include <algorithm>
#include <chrono>
#include <span>

namespace keel::engine {

StepExecutor::StepExecutor(const model::Model& model, model::KvStorage* storage, kernels::Isa isa,
                           int threads, int64_t max_batch_tokens, int64_t select_layer,
                           const draft::DraftHead* draft_head,
                           const draft::ExitPredictors* exit_predictors,
                           PipelineTail* pipeline_tail, model::ExpertTokenCounts* expert_counts,
                           model::ExpertParallel expert_parallel,
                           draft::DraftModelRunner* draft_model)
    : model_(model),
      storage_(storage),
      isa_(isa),
      threads_(threads),
      max_batch_tokens_(max_batch_tokens),
      select_layer_(select_layer),
      draft_head_(draft_head),
      exit_predictors_(exit_predictors),
      pipeline_tail_(pipeline_tail),
      expert_counts_(expert_counts),
      expert_parallel_(expert_parallel),
      draft_model_(draft_model),
      thread_([this] { run(); }) {}

StepExecutor::~StepExecutor() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StepExecutor::launch(StepInput input) {
  KEEL_CHECK(!busy_);
  busy_ = true;
  {
    MutexLock lock(mu_);
    input_ = std::move(input);
  }
  cv_.notify_all();
}

StepOutput StepExecutor::wait() {
  KEEL_CHECK(busy_);
  UniqueLock lock(mu_);
  cv_.wait(lock.native(), [this] {
    mu_.assert_held();
    return output_.has_value();
  });
  StepOutput out = std::move(*output_);
  output_.reset();
  busy_ = false;
  return out;
}

Status StepExecutor::run_probe(model::Context& ctx, kernels::Ops& ops, const model::Batch& probe,
                               std::vector<float>* deviation) {
  const auto piece = static_cast<size_t>(max_batch_tokens_);
  std::vector<float> part;
  for (size_t i = 0; i < probe.size(); i += piece) {
    model::Batch b;
    b.seqs = probe.seqs;
    for (size_t j = i; j < std::min(probe.size(), i + piece); ++j) {
      b.add(probe.tokens[j], probe.positions[j], probe.seq_index[j], false);
    }
    KEEL_TRY(ctx.value_deviation(b, *storage_, ops, kCacheBlendCheckLayer, &part));
    deviation->insert(deviation->end(), part.begin(), part.end());
  }
  return Status();
}

Status StepExecutor::forward_pipeline(model::Context& ctx, kernels::Ops& ops,
                                      const StepInput& input, std::vector<float>* logits) {
  residual_.clear();
  if (!input.batch.empty()) {
    KEEL_TRY(ctx.forward_first_stage(input.batch, *storage_, ops, &residual_));
  }
  PipelineStep step;
  step.batch = &input.batch;
  step.residual = residual_;
  step.block_copies = input.block_copies;
  return pipeline_tail_->run(step, logits);
}

Status StepExecutor::forward(model::Context& ctx, kernels::Ops& ops, const StepInput& input,
                             bool want_hidden, std::vector<float>* logits,
                             std::vector<float>* hidden, std::vector<int32_t>* row_exit) {
  const model::Batch& batch = input.batch;
  row_exit->clear();  // the default path: no early exit, nothing allocated
  if (pipeline_tail_ != nullptr) return forward_pipeline(ctx, ops, input, logits);
  const bool any = exit_predictors_ != nullptr && draft_head_ != nullptr &&
                   std::any_of(input.samples.begin(), input.samples.end(),
                               [](const StepInput::Sample& s) { return s.early_exit.on; });
  if (!any) return ctx.forward(batch, *storage_, ops, logits, want_hidden ? hidden : nullptr);
  const size_t n = batch.size();
  const auto n_layer = static_cast<size_t>(model_.hparams().n_layer);
  const auto n_embd = static_cast<size_t>(model_.hparams().n_embd);
  std::vector<size_t> row_token;  // logits row → batch token
  std::vector<int32_t> per_seq(batch.seqs.size(), 0);
  for (size_t t = 0; t < n; ++t) {
    if (batch.logits[t]) row_token.push_back(t);
    ++per_seq[static_cast<size_t>(batch.seq_index[t])];
  }
  row_exit->assign(row_token.size(), -1);
  draft::ExitPass pass(*exit_predictors_, model_, n);
  std::vector<int32_t> row_of_token(n, -1);  // batch token → its logits row, when it may exit
  draft::DraftScratch scratch;
  size_t row = 0;
  for (const StepInput::Sample& s : input.samples) {
    const size_t first = row, rows = s.drafts.size() + 1;
    row += rows;
    const StepInput::Sample::EarlyExit& e = s.early_exit;
    if (!e.on || e.active.size() != n_layer) continue;
    const size_t t0 = row_token[first];
    if (per_seq[static_cast<size_t>(batch.seq_index[t0])] != static_cast<int32_t>(rows)) {
      continue;  // a prefill piece
    }
    if (s.drafts.empty()) {
      if (e.feature.size() != n_embd) continue;  // the first token after the prefill
      pass.add_row(t0, *draft_head_, e.feature, batch.tokens[t0], e.threshold, e.active, ops,
                   &scratch);
    } else {
      const auto per_row = static_cast<size_t>(draft::kExitCandidates);
      if (e.candidates.size() != rows * per_row) continue;  // n-gram drafts: full depth
      for (size_t j = 0; j < rows; ++j) {
        pass.add_row(row_token[first + j],
                     std::span<const int32_t>(e.candidates.data() + j * per_row, per_row),
                     e.threshold, e.active);
      }
    }
    for (size_t j = 0; j < rows; ++j) {
      row_of_token[row_token[first + j]] = static_cast<int32_t>(first + j);
    }
  }
  model::EarlyExit ee;
  pass.bind(&ee, ops);
  KEEL_TRY(ctx.forward_early_exit(batch, *storage_, ops, &ee, logits, hidden));
  for (size_t t = 0; t < n; ++t) {
    if (row_of_token[t] >= 0) (*row_exit)[static_cast<size_t>(row_of_token[t])] = ee.exit_layer[t];
  }
  return Status();
}

void StepExecutor::sample_all(StepInput& input, std::vector<float>& logits,
                              const std::vector<float>& hidden,
                              const std::vector<int32_t>& row_exit, kernels::Ops& ops,
                              StepOutput* out) {
  const auto n_vocab = static_cast<size_t>(model_.hparams().n_vocab);
  const auto n_embd = static_cast<size_t>(model_.hparams().n_embd);
  size_t row = 0;
  std::vector<sampling::SampleOutput> emitted;
  draft::DraftScratch scratch;
  std::vector<std::vector<int32_t>> model_tokens;  // per draft-model job: its sequence
  std::vector<draft::DraftJob> model_jobs;
  for (size_t i = 0; i < input.samples.size(); ++i) {
    StepInput::Sample& sample = input.samples[i];
    const size_t rows = sample.drafts.size() + 1;
    KEEL_CHECK(logits.size() >= (row + rows) * n_vocab);
    std::span<float> span(logits.data() + row * n_vocab, rows * n_vocab);
    row += rows;
    emitted.clear();
    const int32_t accepted =
        sampling::verify_drafts(*sample.sampler, span, sample.drafts, &emitted);
    if (!sample.drafts.empty()) {
      ++out->num_verified;
      out->num_drafted += static_cast<int64_t>(sample.drafts.size());
      out->num_accepted += accepted;
    }
    if (sample.head_k > 0 && !hidden.empty()) {
      // The row that emitted the last token: after the accepted drafts.
      const size_t h = row - rows + static_cast<size_t>(accepted);
      KEEL_CHECK(hidden.size() >= (h + 1) * n_embd);
      const auto t0 = std::chrono::steady_clock::now();
      StepOutput::Proposal& p = out->proposals.emplace_back();
      p.key = sample.key;
      const std::span<const float> f(hidden.data() + h * n_embd, n_embd);
      if (sample.early_exit.on) {  // the next verification's rows get the candidates
        draft_head_->draft_with_candidates(f, emitted.back().token, sample.head_k,
                                           draft::kExitCandidates, ops, &scratch, &p.drafts,
                                           &p.candidates);
      } else {
        draft_head_->draft(f, emitted.back().token, sample.head_k, ops, &scratch, &p.drafts);
      }
      out->draft_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (sample.early_exit.on && !hidden.empty()) {
      // The feature of the row that emitted the last token (as the draft head's).
      const size_t h = row - rows + static_cast<size_t>(accepted);
      KEEL_CHECK(hidden.size() >= (h + 1) * n_embd);
      StepOutput::Exit& x = out->exits.emplace_back();
      x.key = sample.key;
      x.feature.assign(hidden.begin() + static_cast<ptrdiff_t>(h * n_embd),
                       hidden.begin() + static_cast<ptrdiff_t>((h + 1) * n_embd));
      const size_t first = row - rows;
      if (!row_exit.empty() && row_exit[first] >= 0) {  // its rows could exit
        for (size_t r = first; r <= h; ++r) x.layers.push_back(row_exit[r]);
      }
    }
    if (sample.model_k > 0 && draft_model_ != nullptr) {
      std::vector<int32_t>& seq = model_tokens.emplace_back(std::move(sample.known_tokens));
      for (const sampling::SampleOutput& s : emitted) seq.push_back(s.token);
      model_jobs.push_back({.seq_id = sample.key, .k = sample.model_k});
    }
    for (sampling::SampleOutput& s : emitted) {
      out->tokens.push_back({sample.key, s.token, std::move(s.logprobs)});
    }
  }
  KEEL_CHECK(row * n_vocab == logits.size());
  if (model_jobs.empty()) return;
  for (size_t j = 0; j < model_jobs.size(); ++j) model_jobs[j].tokens = model_tokens[j];
  draft_with_model(model_jobs, ops, out);
}

void StepExecutor::draft_with_model(std::vector<draft::DraftJob>& jobs, kernels::Ops& ops,
                                    StepOutput* out) {
  const auto t0 = std::chrono::steady_clock::now();
  if (Status st = draft_model_->draft(jobs, ops); !st.ok()) {
    KEEL_LOG_WARN("draft model: {}", st.to_string());
    return;
  }
  for (draft::DraftJob& j : jobs) {
    if (!j.drafts.empty()) out->proposals.push_back({j.seq_id, std::move(j.drafts), {}});
  }
  out->draft_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void StepExecutor::run() {
  // The pool, ops and scratch live on this thread: it is the pool's only caller.
  ThreadPool pool(threads_);
  kernels::Ops ops(isa_, &pool);
  model::Context ctx(model_, max_batch_tokens_,
                     pipeline_tail_ != nullptr ? model::LayerRange{0, pipeline_tail_->first_layer()}
                                               : model::LayerRange{});
  ctx.count_experts(expert_counts_);
  if (expert_parallel_.remote != nullptr) ctx.set_expert_parallel(expert_parallel_);
  SparseSelector selector(model_.hparams());
  std::vector<float> logits, hidden;
  for (;;) {
    StepInput input;
    {
      UniqueLock lock(mu_);
      cv_.wait(lock.native(), [this] {
        mu_.assert_held();
        return stop_ || input_.has_value();
      });
      if (stop_) return;
      input = std::move(*input_);
      input_.reset();
    }
    StepOutput out;
    const auto t0 = std::chrono::steady_clock::now();
    logits.clear();
    hidden.clear();
    const bool want_hidden =
        draft_head_ != nullptr &&
        std::any_of(input.samples.begin(), input.samples.end(),
                    [](const StepInput::Sample& s) { return s.head_k > 0 || s.early_exit.on; });
    std::vector<int32_t> row_exit;
    if (selector.bind(std::move(input.sparse))) {
      input.batch.selector = &selector;
      input.batch.select_layer = select_layer_;
    }
    if (!input.batch.empty() || !input.block_copies.empty()) {
      out.status = forward(ctx, ops, input, want_hidden, &logits, &hidden, &row_exit);
    }
    out.forward_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (out.status.ok() && !input.probe.empty()) {
      out.probe_key = input.probe_key;
      out.status = run_probe(ctx, ops, input.probe, &out.deviation);
    }
    if (out.status.ok()) {
      sample_all(input, logits, hidden, row_exit, ops, &out);
    }
    {
      MutexLock lock(mu_);
      output_ = std::move(out);
    }
    cv_.notify_all();
  }
}

}  // namespace keel::engine
