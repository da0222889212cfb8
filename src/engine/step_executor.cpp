// StepExecutor: a mailbox of one step between the engine thread and the executor thread.
#include "engine/step_executor.h"

#include "engine/pic_prefill.h"

#include <algorithm>
#include <chrono>
#include <span>

namespace keel::engine {

StepExecutor::StepExecutor(const model::Model& model, model::KvStorage* storage, kernels::Isa isa,
                           int threads, int64_t max_batch_tokens, int64_t select_layer,
                           const draft::DraftHead* draft_head)
    : model_(model),
      storage_(storage),
      isa_(isa),
      threads_(threads),
      max_batch_tokens_(max_batch_tokens),
      select_layer_(select_layer),
      draft_head_(draft_head),
      thread_([this] { run(); }) {}

StepExecutor::~StepExecutor() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StepExecutor::launch(StepInput input) {
  KEEL_CHECK(!busy_);
  busy_ = true;
  {
    std::lock_guard lock(mu_);
    input_ = std::move(input);
  }
  cv_.notify_all();
}

StepOutput StepExecutor::wait() {
  KEEL_CHECK(busy_);
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return output_.has_value(); });
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

void StepExecutor::sample_all(StepInput& input, std::vector<float>& logits,
                              const std::vector<float>& hidden, kernels::Ops& ops,
                              StepOutput* out) {
  const auto n_vocab = static_cast<size_t>(model_.hparams().n_vocab);
  const auto n_embd = static_cast<size_t>(model_.hparams().n_embd);
  size_t row = 0;
  std::vector<sampling::SampleOutput> emitted;
  draft::DraftScratch scratch;
  for (StepInput::Sample& sample : input.samples) {
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
      draft_head_->draft(std::span<const float>(hidden.data() + h * n_embd, n_embd),
                         emitted.back().token, sample.head_k, ops, &scratch, &p.drafts);
      out->draft_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    for (sampling::SampleOutput& s : emitted) {
      out->tokens.push_back({sample.key, s.token, std::move(s.logprobs)});
    }
  }
  KEEL_CHECK(row * n_vocab == logits.size());
}

void StepExecutor::run() {
  // The pool, ops and scratch live on this thread: it is the pool's only caller.
  ThreadPool pool(threads_);
  kernels::Ops ops(isa_, &pool);
  model::Context ctx(model_, max_batch_tokens_);
  SparseSelector selector(model_.hparams());
  std::vector<float> logits, hidden;
  for (;;) {
    StepInput input;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stop_ || input_.has_value(); });
      if (stop_) return;
      input = std::move(*input_);
      input_.reset();
    }
    StepOutput out;
    const auto t0 = std::chrono::steady_clock::now();
    logits.clear();
    hidden.clear();
    const bool want_hidden = draft_head_ != nullptr &&
                             std::any_of(input.samples.begin(), input.samples.end(),
                                         [](const StepInput::Sample& s) { return s.head_k > 0; });
    if (selector.bind(std::move(input.sparse))) {
      input.batch.selector = &selector;
      input.batch.select_layer = select_layer_;
    }
    if (!input.batch.empty()) {
      out.status =
          ctx.forward(input.batch, *storage_, ops, &logits, want_hidden ? &hidden : nullptr);
    }
    out.forward_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (out.status.ok() && !input.probe.empty()) {
      out.probe_key = input.probe_key;
      out.status = run_probe(ctx, ops, input.probe, &out.deviation);
    }
    if (out.status.ok()) {
      sample_all(input, logits, hidden, ops, &out);
    }
    {
      std::lock_guard lock(mu_);
      output_ = std::move(out);
    }
    cv_.notify_all();
  }
}

}  // namespace keel::engine
