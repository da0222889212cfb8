// run_sparse_eval (see sparse_eval.h): SparseEval holds one Context and one KV storage with two
// tables — the reference generation's pages and the policy run's — reused across generations.
#include "eval/sparse_eval.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "engine/pic_prefill.h"
#include "engine/sparse_decode.h"
#include "eval/model_text.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"
#include "sampling/softmax_math.h"

namespace keel::eval {
namespace {

struct SparseTotals {  // one policy, summed over generations
  double kl = 0, top1 = 0, steps = 0;
  int32_t max_pages = 0, prefill_pages = 0;
  double final_pages = 0;
  double quarter_ms[kSparseQuarters] = {};
  double quarter_steps[kSparseQuarters] = {};
  double curve_pages[kSparseCurvePoints] = {};
  int generations = 0;
};

// The reference: prompt + sampled continuation, and the dense logits of every decode step.
struct SparseReference {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // [step]: after feeding tokens[prompt_len + step]
};

class SparseEval {
 public:
  SparseEval(const SparseEvalConfig& config, const model::Model& model, kernels::Ops& ops,
             TextSpec text)
      : config_(config),
        model_(model),
        ops_(ops),
        text_(text),
        ctx_(model, config.prompt_len),
        selector_(model.hparams()) {
    tuning_.alpha = config.alpha;
    tuning_.sink_tokens = config.sink;
    tuning_.window_tokens = config.window;
    tuning_.dense_layers = config.dense_layers;
  }

  Status init() {
    const auto layout =
        model::KvLayout::for_model(model_.hparams(), config_.page_size, DType::kF32);
    pages_ = (config_.max_len + config_.page_size - 1) / config_.page_size;
    KEEL_ASSIGN_OR_RETURN(model::KvStorage kv, model::KvStorage::create(layout, 2 * pages_));
    kv_ = std::make_unique<model::KvStorage>(std::move(kv));
    ref_table_.resize(static_cast<size_t>(pages_));
    std::iota(ref_table_.begin(), ref_table_.end(), 0);
    run_table_.resize(static_cast<size_t>(pages_));
    std::iota(run_table_.begin(), run_table_.end(), pages_);
    return Status();
  }

  Result<SparseReference> reference(uint64_t seed) {
    SparseReference r;
    KEEL_ASSIGN_OR_RETURN(r.tokens, model_written_tokens(ctx_, *kv_, ops_, ref_table_, text_,
                                                         seed * 7919 + 1, config_.prompt_len));
    sampling::SamplingParams sp;
    sp.temperature = 0.8f;
    sp.top_k = 40;
    sp.seed = seed * 7919 + 2;
    KEEL_ASSIGN_OR_RETURN(sampling::Sampler sampler, sampling::Sampler::create(sp, text_.n_vocab));
    std::vector<float> logits;
    KEEL_TRY(engine::compile_chunk(ctx_, *kv_, ops_, r.tokens, ref_table_, &logits));
    while (static_cast<int32_t>(r.tokens.size()) < config_.max_len) {
      int32_t next = sampler.sample(logits);
      if (next == text_.eos || next == text_.bos) next = argmax_excluding(logits, text_);
      sampler.accept(next);
      r.tokens.push_back(next);
      if (static_cast<int32_t>(r.tokens.size()) == config_.max_len) break;
      model::Batch b;
      const int32_t seq = b.add_seq(ref_table_);
      b.add(next, static_cast<int32_t>(r.tokens.size()) - 1, seq, true);
      KEEL_TRY(ctx_.forward(b, *kv_, ops_, &logits));
      r.logits.push_back(logits);
    }
    return r;
  }

  // Teacher-forces `policy` along the reference, adding its figures to *t.
  Status run(const SparseReference& ref, const std::string& policy, SparseTotals* t) {
    KEEL_ASSIGN_OR_RETURN(std::unique_ptr<engine::SparseSequence> st,
                          engine::make_sparse_sequence({policy, config_.budget}, tuning_,
                                                       config_.page_size, config_.prompt_len));
    const int64_t select_layer = engine::sparse_select_layer(tuning_, model_.hparams().n_layer);
    std::vector<float> logits;
    const std::span<const int32_t> prompt(ref.tokens.data(),
                                          static_cast<size_t>(config_.prompt_len));
    KEEL_TRY(engine::compile_chunk(ctx_, *kv_, ops_, prompt, run_table_, &logits));
    const int32_t page = config_.page_size;
    t->prefill_pages = (config_.prompt_len + page - 1) / page;
    const size_t n_steps = ref.logits.size();
    for (size_t j = 0; j < n_steps; ++j) {
      const int32_t pos = config_.prompt_len + static_cast<int32_t>(j);
      model::Batch b;
      const int32_t seq = b.add_seq(run_table_);
      b.add(ref.tokens[static_cast<size_t>(pos)], pos, seq, true);
      if (st != nullptr) {
        st->prepare_decode(&b.seqs[0], pos, page);
        selector_.bind({{st.get(), 0}});
        b.selector = &selector_;
        b.select_layer = select_layer;
      }
      const auto t0 = std::chrono::steady_clock::now();
      KEEL_TRY(ctx_.forward(b, *kv_, ops_, &logits));
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      const int q = static_cast<int>(j * kSparseQuarters / n_steps);
      t->quarter_ms[q] += ms;
      t->quarter_steps[q] += 1;
      t->kl += sampling::kl_divergence(ref.logits[j], logits);
      t->top1 += sampling::argmax(ref.logits[j]) == sampling::argmax(logits) ? 1 : 0;
      t->steps += 1;
      int32_t held = pos / page + 1;
      if (st != nullptr) {
        st->pending.clear();  // released pages are masked from st->released at the next step
        held -= static_cast<int32_t>(st->released.size());
      }
      t->max_pages = std::max(t->max_pages, held);
      const int c = static_cast<int>(j * kSparseCurvePoints / n_steps);
      if ((j + 1) * kSparseCurvePoints / n_steps != static_cast<size_t>(c)) {
        t->curve_pages[c] += held;
      }
      if (j + 1 == n_steps) t->final_pages += held;
    }
    ++t->generations;
    return Status();
  }

 private:
  const SparseEvalConfig& config_;
  const model::Model& model_;
  kernels::Ops& ops_;
  TextSpec text_;
  model::Context ctx_;
  engine::SparseSelector selector_;
  sparse::SparseConfig tuning_;
  std::unique_ptr<model::KvStorage> kv_;
  int32_t pages_ = 0;
  std::vector<int32_t> ref_table_, run_table_;
};

SparsePolicyResult sparse_result(const std::string& policy, int32_t generated_tokens,
                                 const SparseTotals& t) {
  SparsePolicyResult r;
  r.policy = policy;
  const double g = std::max(t.generations, 1);
  const double generated = generated_tokens;
  r.top1_agreement = t.top1 / std::max(t.steps, 1.0);
  r.kl = t.kl / std::max(t.steps, 1.0);
  r.prefill_pages = t.prefill_pages;
  r.max_pages_held = t.max_pages;
  r.final_pages_held = t.final_pages / g;
  for (int c = 0; c < kSparseCurvePoints; ++c) {
    r.curve_tokens[c] = static_cast<int>((c + 1) * generated / kSparseCurvePoints);
    r.curve_pages[c] = t.curve_pages[c] / g;
  }
  for (int q = 0; q < kSparseQuarters; ++q) {
    r.ms_per_token[q] = t.quarter_ms[q] / std::max(t.quarter_steps[q], 1.0);
  }
  r.generations = t.generations;
  return r;
}

}  // namespace

Result<SparseEvalReport> run_sparse_eval(const model::Model& model, const tokenizer::Tokenizer& tok,
                                         kernels::Ops& ops, const SparseEvalConfig& config) {
  SparseEvalConfig c = config;
  const auto n_ctx = static_cast<int32_t>(model.n_ctx());
  if (c.max_len == 0) c.max_len = n_ctx;
  if (c.max_len > n_ctx || c.max_len < c.prompt_len + 2) {
    return Status::invalid_argument("--max-len must be in [--prompt-len + 2, " +
                                    std::to_string(n_ctx) + " (the model's context)]");
  }
  if (c.budget < c.page_size) {
    return Status::invalid_argument("--budget must be at least --page-size");
  }
  const TextSpec text{tok.bos_id(), tok.eos_id(), static_cast<int32_t>(model.hparams().n_vocab)};
  SparseEval eval(c, model, ops, text);
  KEEL_TRY(eval.init());
  std::vector<SparseTotals> totals(c.policies.size());
  for (int32_t i = 0; i < c.prompts; ++i) {
    KEEL_ASSIGN_OR_RETURN(SparseReference ref,
                          eval.reference(c.seed * 1000 + static_cast<uint64_t>(i)));
    for (size_t p = 0; p < c.policies.size(); ++p) {
      KEEL_TRY(eval.run(ref, c.policies[p], &totals[p]));
    }
  }
  SparseEvalReport report;
  report.generated_tokens = c.max_len - c.prompt_len;
  for (size_t p = 0; p < c.policies.size(); ++p) {
    report.policies.push_back(sparse_result(c.policies[p], report.generated_tokens, totals[p]));
  }
  return report;
}

}  // namespace keel::eval
