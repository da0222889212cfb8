// `keel eval sparse`: sparse-decode policies against dense decoding on one model. For each of
// --prompts generations (fixed seed) the model writes a --prompt-len prompt itself, then dense
// decoding samples a continuation up to --max-len (temperature 0.8, top-k 40): the reference
// sequence and, at every decode step, the reference next-token distribution. Each policy
// prefills the same prompt densely and is teacher-forced along the reference sequence through
// engine::SparseSelector — the code the engine runs — with the same budget L: per step
// KL(dense ‖ policy) and top-1 agreement; the pages it holds (prompt pages + decode pages not
// released) against the tokens generated; and the wall time of each decode step, reported per
// quarter of the generation. Output: a markdown table, or one JSON object per policy (--json).
#include <chrono>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/thread_pool.h"
#include "engine/pic_prefill.h"
#include "engine/sparse_decode.h"
#include "host/compute.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "model_loading.h"
#include "model_text.h"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"
#include "sampling/softmax_math.h"

namespace keel::cli {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kQuarters = 4;
constexpr int kCurvePoints = 8;  // pages-held samples along the generation

struct SparseTotals {  // one policy, summed over generations
  double kl = 0, top1 = 0, steps = 0;
  int32_t max_pages = 0, prefill_pages = 0;
  double final_pages = 0;
  double quarter_ms[kQuarters] = {};
  double quarter_steps[kQuarters] = {};
  double curve_pages[kCurvePoints] = {};
  int generations = 0;
};

// The reference: prompt + sampled continuation, and the dense logits of every decode step.
struct Reference {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // [step]: after feeding tokens[prompt_len + step]
};

class SparseEval {
 public:
  SparseEval(const EvalSparseOptions& opts, const model::Model& model, kernels::Ops& ops,
             TextSpec text)
      : opts_(opts),
        model_(model),
        ops_(ops),
        text_(text),
        ctx_(model, opts.prompt_len),
        selector_(model.hparams()) {
    tuning_.alpha = opts.alpha;
    tuning_.sink_tokens = opts.sink;
    tuning_.window_tokens = opts.window;
    tuning_.dense_layers = opts.dense_layers;
  }

  Status init() {
    const auto layout = model::KvLayout::for_model(model_.hparams(), opts_.page_size, DType::kF32);
    pages_ = (opts_.max_len + opts_.page_size - 1) / opts_.page_size;
    KEEL_ASSIGN_OR_RETURN(model::KvStorage kv, model::KvStorage::create(layout, 2 * pages_));
    kv_ = std::make_unique<model::KvStorage>(std::move(kv));
    ref_table_.resize(static_cast<size_t>(pages_));
    std::iota(ref_table_.begin(), ref_table_.end(), 0);
    run_table_.resize(static_cast<size_t>(pages_));
    std::iota(run_table_.begin(), run_table_.end(), pages_);
    return Status();
  }

  Result<Reference> reference(uint64_t seed) {
    Reference r;
    KEEL_ASSIGN_OR_RETURN(r.tokens, model_written_tokens(ctx_, *kv_, ops_, ref_table_, text_,
                                                         seed * 7919 + 1, opts_.prompt_len));
    sampling::SamplingParams sp;
    sp.temperature = 0.8f;
    sp.top_k = 40;
    sp.seed = seed * 7919 + 2;
    KEEL_ASSIGN_OR_RETURN(sampling::Sampler sampler, sampling::Sampler::create(sp, text_.n_vocab));
    std::vector<float> logits;
    KEEL_TRY(engine::compile_chunk(ctx_, *kv_, ops_, r.tokens, ref_table_, &logits));
    while (static_cast<int32_t>(r.tokens.size()) < opts_.max_len) {
      int32_t next = sampler.sample(logits);
      if (next == text_.eos || next == text_.bos) next = argmax_excluding(logits, text_);
      sampler.accept(next);
      r.tokens.push_back(next);
      if (static_cast<int32_t>(r.tokens.size()) == opts_.max_len) break;
      model::Batch b;
      const int32_t seq = b.add_seq(ref_table_);
      b.add(next, static_cast<int32_t>(r.tokens.size()) - 1, seq, true);
      KEEL_TRY(ctx_.forward(b, *kv_, ops_, &logits));
      r.logits.push_back(logits);
    }
    return r;
  }

  // Teacher-forces `policy` along the reference, adding its figures to *t.
  Status run(const Reference& ref, const std::string& policy, SparseTotals* t) {
    KEEL_ASSIGN_OR_RETURN(std::unique_ptr<engine::SparseSequence> st,
                          engine::make_sparse_sequence({policy, opts_.budget}, tuning_,
                                                       opts_.page_size, opts_.prompt_len));
    const int64_t select_layer = engine::sparse_select_layer(tuning_, model_.hparams().n_layer);
    std::vector<float> logits;
    const std::span<const int32_t> prompt(ref.tokens.data(), static_cast<size_t>(opts_.prompt_len));
    KEEL_TRY(engine::compile_chunk(ctx_, *kv_, ops_, prompt, run_table_, &logits));
    const int32_t page = opts_.page_size;
    t->prefill_pages = (opts_.prompt_len + page - 1) / page;
    const size_t n_steps = ref.logits.size();
    for (size_t j = 0; j < n_steps; ++j) {
      const int32_t pos = opts_.prompt_len + static_cast<int32_t>(j);
      model::Batch b;
      const int32_t seq = b.add_seq(run_table_);
      b.add(ref.tokens[static_cast<size_t>(pos)], pos, seq, true);
      if (st != nullptr) {
        st->prepare_decode(&b.seqs[0], pos, page);
        selector_.bind({{st.get(), 0}});
        b.selector = &selector_;
        b.select_layer = select_layer;
      }
      const auto t0 = Clock::now();
      KEEL_TRY(ctx_.forward(b, *kv_, ops_, &logits));
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      const int q = static_cast<int>(j * kQuarters / n_steps);
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
      const int c = static_cast<int>(j * kCurvePoints / n_steps);
      if ((j + 1) * kCurvePoints / n_steps != static_cast<size_t>(c)) t->curve_pages[c] += held;
      if (j + 1 == n_steps) t->final_pages += held;
    }
    ++t->generations;
    return Status();
  }

 private:
  const EvalSparseOptions& opts_;
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

void print(const EvalSparseOptions& opts, const std::string& policy, const SparseTotals& t) {
  const double g = std::max(t.generations, 1);
  const double generated = opts.max_len - opts.prompt_len;
  auto quarter = [&](int q) { return t.quarter_ms[q] / std::max(t.quarter_steps[q], 1.0); };
  if (opts.json) {
    nlohmann::json curve = nlohmann::json::array();
    for (int c = 0; c < kCurvePoints; ++c) {
      curve.push_back({{"generated_tokens", static_cast<int>((c + 1) * generated / kCurvePoints)},
                       {"pages_held", t.curve_pages[c] / g}});
    }
    nlohmann::json quarters = nlohmann::json::array();
    for (int q = 0; q < kQuarters; ++q) quarters.push_back(quarter(q));
    const nlohmann::json j = {{"policy", policy},
                              {"budget", opts.budget},
                              {"page_size", opts.page_size},
                              {"top1_agreement", t.top1 / std::max(t.steps, 1.0)},
                              {"kl", t.kl / std::max(t.steps, 1.0)},
                              {"max_pages_held", t.max_pages},
                              {"prefill_pages", t.prefill_pages},
                              {"final_pages_held", t.final_pages / g},
                              {"generated_tokens", static_cast<int>(generated)},
                              {"pages_held_curve", curve},
                              {"ms_per_token_by_quarter", quarters},
                              {"generations", t.generations}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("| %s | %d | %.3f | %.4f | %d | %d | %.1f | %.3f | %.3f |\n", policy.c_str(),
              opts.budget, t.top1 / std::max(t.steps, 1.0), t.kl / std::max(t.steps, 1.0),
              t.prefill_pages, t.max_pages, t.final_pages / g, quarter(0), quarter(kQuarters - 1));
}

Status evaluate(EvalSparseOptions opts, const host::ComputeSetup& setup) {
  ThreadPool pool(setup.threads);
  KEEL_ASSIGN_OR_RETURN(LoadedModel loaded,
                        load_model(opts.model_path, opts.compute, model::ModelOptions{}, pool));
  kernels::Ops ops(setup.isa, &pool);
  const auto n_ctx = static_cast<int32_t>(loaded.model->n_ctx());
  if (opts.max_len == 0) opts.max_len = n_ctx;
  if (opts.max_len > n_ctx || opts.max_len < opts.prompt_len + 2) {
    return Status::invalid_argument("--max-len must be in [--prompt-len + 2, " +
                                    std::to_string(n_ctx) + " (the model's context)]");
  }
  if (opts.budget < opts.page_size) {
    return Status::invalid_argument("--budget must be at least --page-size");
  }
  const TextSpec text{loaded.tokenizer->bos_id(), loaded.tokenizer->eos_id(),
                      static_cast<int32_t>(loaded.model->hparams().n_vocab)};
  SparseEval eval(opts, *loaded.model, ops, text);
  KEEL_TRY(eval.init());
  std::vector<SparseTotals> totals(opts.policies.size());
  for (int32_t i = 0; i < opts.prompts; ++i) {
    KEEL_ASSIGN_OR_RETURN(Reference ref,
                          eval.reference(opts.seed * 1000 + static_cast<uint64_t>(i)));
    for (size_t p = 0; p < opts.policies.size(); ++p) {
      KEEL_TRY(eval.run(ref, opts.policies[p], &totals[p]));
    }
  }
  if (!opts.json) {
    std::printf(
        "| policy | budget L | top-1 agreement | KL (nats) | prefill pages | max pages held | "
        "pages held at the end (of %d generated tokens) | ms/token, first quarter | ms/token, "
        "last quarter |\n|---|---|---|---|---|---|---|---|---|\n",
        opts.max_len - opts.prompt_len);
  }
  for (size_t p = 0; p < opts.policies.size(); ++p) print(opts, opts.policies[p], totals[p]);
  return Status();
}

}  // namespace

int run_eval_sparse(const EvalSparseOptions& opts) {
  auto setup = host::setup_compute(opts.compute);
  if (!setup.ok()) return report_error(setup.status());
  const Status s = evaluate(opts, *setup);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
