// run_spec_eval (see spec_eval.h): one fresh engine per row, requests one at a time, and the
// perplexity of each row's text under the full-depth model on a bare Context.
#include "eval/spec_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "core/thread_pool.h"
#include "draft/draft_model.h"
#include "draft/exit_predictor_file.h"
#include "engine/engine.h"
#include "kernels/kernels.h"
#include "model/context.h"
#include "model/kv_storage.h"

namespace keel::eval {
namespace {

using Prompts = std::vector<std::vector<int32_t>>;

// Config of one row.
struct SpecRowConfig {
  engine::SpeculativeParams spec;
  bool early_exit = false;
  float threshold = 0.5f;  // the predictors' exit threshold
};

// exp(mean NLL) of each output token given the prompt and the output before it, at full depth.
Result<double> spec_perplexity(const model::Model& m, kernels::Ops& ops, const Prompts& prompts,
                               const SpecRow& row) {
  double nll = 0;
  int64_t n = 0;
  constexpr int32_t kBlock = 16;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int32_t> toks = prompts[i];
    toks.insert(toks.end(), row.outputs[i].begin(), row.outputs[i].end());
    const auto len = static_cast<int32_t>(toks.size());
    const int32_t blocks = (len + kBlock - 1) / kBlock;
    KEEL_ASSIGN_OR_RETURN(
        model::KvStorage kv,
        model::KvStorage::create(model::KvLayout::for_model(m.hparams(), kBlock, DType::kF32),
                                 blocks));
    model::Context ctx(m, len);
    std::vector<int32_t> table(static_cast<size_t>(blocks));
    for (int32_t b = 0; b < blocks; ++b) table[static_cast<size_t>(b)] = b;
    model::Batch batch;
    const int32_t seq = batch.add_seq(table);
    const auto first = static_cast<int32_t>(prompts[i].size());
    for (int32_t p = 0; p + 1 < len; ++p)
      batch.add(toks[static_cast<size_t>(p)], p, seq, p + 1 >= first);
    std::vector<float> logits;
    KEEL_TRY(ctx.forward(batch, kv, ops, &logits));
    const auto v = static_cast<size_t>(m.hparams().n_vocab);
    for (int32_t p = first; p < len; ++p) {
      const float* l = logits.data() + static_cast<size_t>(p - first) * v;
      const float top = *std::max_element(l, l + v);
      double z = 0;
      for (size_t j = 0; j < v; ++j) z += std::exp(static_cast<double>(l[j] - top));
      nll += std::log(z) - static_cast<double>(l[toks[static_cast<size_t>(p)]] - top);
      ++n;
    }
  }
  return n > 0 ? std::exp(nll / static_cast<double>(n)) : 0.0;
}

// Collects one request's tokens; wait() returns them once it finished.
class SpecSink final : public engine::OutputSink {
 public:
  void on_event(engine::TokenEvent ev) override {
    MutexLock lock(mu_);
    tokens_.insert(tokens_.end(), ev.tokens.begin(), ev.tokens.end());
    if (ev.finish) {
      done_ = true;
      cv_.notify_all();
    }
  }
  std::vector<int32_t> wait() {
    UniqueLock lock(mu_);
    cv_.wait(lock.native(), [this] {
      mu_.assert_held();  // a wait's predicate runs under its lock
      return done_;
    });
    return tokens_;
  }

 private:
  Mutex mu_;
  std::condition_variable cv_;
  std::vector<int32_t> tokens_ KEEL_GUARDED_BY(mu_);
  bool done_ KEEL_GUARDED_BY(mu_) = false;
};

// The inputs every row of a run shares.
struct SpecRun {
  const model::Model& model;
  const tokenizer::Tokenizer& tok;
  kernels::Isa isa;
  int threads;
  const SpecEvalConfig& config;
  std::shared_ptr<const model::Model> draft_model;  // loaded once (null: no draft-model rows)
};

Result<SpecRow> run_row(const SpecRun& run, const Prompts& prompts, const SpecRowConfig& rc) {
  engine::EngineConfig c;
  c.threads = run.threads;
  c.isa = run.isa;
  c.eog_token_ids.assign(run.tok.eog_ids().begin(), run.tok.eog_ids().end());
  c.speculative = rc.spec;
  c.draft_head_path = run.config.draft_head_path;
  c.exit_predictors_path = run.config.exit_predictors_path;
  c.early_exit.enabled = rc.early_exit;
  c.early_exit.threshold = rc.threshold;
  engine::EngineDeps deps;
  deps.draft_model = run.draft_model;
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> e,
                        engine::Engine::start(run.model, c, std::move(deps)));
  SpecRow row;
  for (const std::vector<int32_t>& p : prompts) {
    engine::GenerationRequest r;
    r.prompt_tokens = p;
    r.max_tokens = run.config.max_tokens;
    r.ignore_eos = true;
    r.sampling.temperature = 0.0f;
    auto sink = std::make_shared<SpecSink>();
    const auto t0 = std::chrono::steady_clock::now();
    KEEL_TRY(e->submit(std::move(r), sink).status());
    row.outputs.push_back(sink->wait());
    row.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  e->drain(std::chrono::seconds(10));
  // The engine publishes its stats after a step's token events: the last step may not be counted
  // yet when its finishing event arrived. Wait (bounded) until every emitted token is.
  int64_t emitted = 0;
  for (const std::vector<int32_t>& out : row.outputs) emitted += static_cast<int64_t>(out.size());
  engine::EngineStats s = e->stats();
  for (int i = 0; i < 2000 && s.generation_tokens_total < emitted; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    s = e->stats();
  }
  row.generated = s.generation_tokens_total;
  row.steps = s.steps_total;
  row.drafted = s.spec_drafted_tokens;
  row.accepted = s.spec_accepted_tokens;
  const engine::MetricsSnapshot m = e->metrics();
  if (rc.early_exit && m.early_exit_layers.count > 0) {
    row.layers = m.early_exit_layers.sum / static_cast<double>(m.early_exit_layers.count);
  }
  ThreadPool ppl_pool(1);
  kernels::Ops ops(run.isa, &ppl_pool);
  KEEL_ASSIGN_OR_RETURN(row.perplexity, spec_perplexity(run.model, ops, prompts, row));
  return row;
}

// Names `row` and fills in its figures against `reference`.
SpecRow finish_row(SpecRow row, const std::string& workload, std::string config,
                   const SpecRow& reference) {
  row.workload = workload;
  row.config = std::move(config);
  row.token_agreement = token_agreement(row, reference);
  row.acceptance_rate =
      row.drafted > 0 ? static_cast<double>(row.accepted) / static_cast<double>(row.drafted) : 0;
  row.tokens_per_step = static_cast<double>(row.generated) / std::max<double>(row.steps, 1);
  row.tokens_per_second = static_cast<double>(row.generated) / std::max(row.seconds, 1e-9);
  row.speedup = (row.tokens_per_second /
                 (static_cast<double>(reference.generated) / std::max(reference.seconds, 1e-9)));
  return row;
}

// The rows of one workload, appended to `report`.
Status run_workload(const SpecRun& run, const SpecWorkload& w, SpecEvalReport* report) {
  const SpecEvalConfig& cfg = run.config;
  Prompts prompts;
  for (const std::string& text : w.prompts) {
    prompts.push_back(run.tok.encode(text, /*add_special=*/true, false));
  }
  KEEL_ASSIGN_OR_RETURN(const SpecRow ar, run_row(run, prompts, SpecRowConfig{}));
  const engine::SpeculativeParams ngram{engine::SpecMethod::kNgram, cfg.k, cfg.ngram_max,
                                        cfg.ngram_min};
  KEEL_TRY(ngram.validate());
  KEEL_ASSIGN_OR_RETURN(SpecRow spec, run_row(run, prompts, SpecRowConfig{ngram}));
  const std::string k = std::to_string(cfg.k);
  report->rows.push_back(finish_row(ar, w.name, "autoregressive", ar));
  report->rows.push_back(finish_row(std::move(spec), w.name, "ngram k=" + k, ar));
  if (run.draft_model != nullptr) {
    const engine::SpeculativeParams dm{engine::SpecMethod::kDraftModel, cfg.k, cfg.ngram_max,
                                       cfg.ngram_min};
    KEEL_ASSIGN_OR_RETURN(SpecRow row, run_row(run, prompts, SpecRowConfig{dm}));
    report->rows.push_back(finish_row(std::move(row), w.name, "draft-model k=" + k, ar));
  }
  const engine::SpeculativeParams head{engine::SpecMethod::kDraftHead, cfg.k, cfg.ngram_max,
                                       cfg.ngram_min};
  Result<SpecRow> drafted = run_row(run, prompts, SpecRowConfig{head});
  if (!drafted.ok()) {
    report->skipped.push_back("draft-head rows skipped: " + drafted.error().message());
    return Status();
  }
  report->rows.push_back(finish_row(std::move(*drafted), w.name, "draft-head k=" + k, ar));
  for (float t : cfg.exit_thresholds) {
    Result<SpecRow> exits = run_row(run, prompts, SpecRowConfig{{}, true, t});
    if (!exits.ok()) {
      report->skipped.push_back("early-exit rows skipped: " + exits.error().message());
      break;
    }
    const std::string name = "early exit t=" + std::to_string(t).substr(0, 4);
    report->rows.push_back(finish_row(std::move(*exits), w.name, name, ar));
    KEEL_ASSIGN_OR_RETURN(SpecRow both, run_row(run, prompts, SpecRowConfig{head, true, t}));
    report->rows.push_back(finish_row(std::move(both), w.name, name + " + draft-head k=" + k, ar));
  }
  return Status();
}

}  // namespace

std::vector<SpecWorkload> default_spec_workloads() {
  return {
      {"stories",
       {"Once upon a time, there was a little girl named Lily.", "Tom had a big red ball.",
        "One day, a cat found a box in the park.", "The sun was hot and the bird was sad.",
        "Sam and his mom went to the store.", "There was a small dog who liked to run."}},
      {"repetitive",
       {"The cat sat on the mat. The cat sat on the mat. The cat sat on the mat.",
        "Lily said hello to Tom. Lily said hello to Tom. Lily said hello to Tom.",
        "One, two, three, one, two, three, one, two, three,",
        "The dog ran and ran. The dog ran and ran. The dog ran and ran. The dog",
        "Ben had a toy car. Ben had a toy car. Ben had a toy car.",
        "Mom made a cake for Sue. Mom made a cake for Sue. Mom made a cake"}},
  };
}

double token_agreement(const SpecRow& row, const SpecRow& reference) {
  int64_t same = 0, total = 0;
  for (size_t i = 0; i < reference.outputs.size(); ++i) {
    const std::vector<int32_t>& a = reference.outputs[i];
    const std::vector<int32_t>& b = row.outputs[i];
    for (size_t j = 0; j < a.size(); ++j) same += j < b.size() && a[j] == b[j];
    total += static_cast<int64_t>(a.size());
  }
  return total > 0 ? static_cast<double>(same) / static_cast<double>(total) : 0.0;
}

Result<SpecEvalReport> run_spec_eval(const model::Model& model, const tokenizer::Tokenizer& tok,
                                     kernels::Isa isa, int threads, const SpecEvalConfig& config) {
  std::shared_ptr<const model::Model> draft_model;
  if (!config.draft_model_path.empty()) {
    KEEL_ASSIGN_OR_RETURN(draft_model, draft::open_draft_model(config.draft_model_path, model));
  }
  const SpecRun run{model, tok, isa, threads, config, std::move(draft_model)};
  SpecEvalReport report;
  for (const SpecWorkload& w : config.workloads) KEEL_TRY(run_workload(run, w, &report));
  const std::string path = config.exit_predictors_path.empty()
                               ? draft::default_exit_path(model.file().path())
                               : config.exit_predictors_path;
  Result<draft::ExitPredictorFile> f = draft::load_exit_predictors(path, model);
  if (f.ok()) {  // without a file: reported with the skipped rows
    report.predictor_accuracy =
        ExitPredictorAccuracy{std::move(f->accuracy), std::move(f->predictors.exit_counts)};
  }
  return report;
}

}  // namespace keel::eval
