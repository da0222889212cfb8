// `keel eval spec`: speculative decoding against autoregressive decoding on one model, through
// the engine itself (docs/speculative.md). Two workloads: "stories" (short story openings the
// model continues) and "repetitive" (openings that repeat a sentence, where prompt lookup
// shines). Per workload and configuration — autoregressive, n-gram speculation, draft-head
// speculation (the head of --draft-head, or the one beside the model) — each prompt is
// decoded greedily (--max-tokens, EOS ignored) one request at a time on a fresh engine, and the
// row reports: token agreement with autoregressive greedy decoding (ids equal at the same
// position), the acceptance rate (accepted / drafted), tokens per decode step (generated tokens
// over the engine steps that produced them, the prefill step included) and tokens per second
// (generated tokens over the wall time from submit to the last token, summed over prompts).
// SpecEE early exit (the exit predictors beside the model, or --exit-predictors) adds two rows:
// early exit alone and early exit with draft-head speculation (the verification rows exit too),
// with the perplexity of the generated text under the full-depth model (teacher forcing, so a
// continuation the model itself would not have written scores worse) and the average layers
// executed per emitted token whose row could exit (keel:early_exit_layers); after the table, each
// layer predictor's held-out accuracy as stored by keel train-exit.
// Output: a markdown table, or one JSON object per row (--json).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "draft/exit_predictor_file.h"
#include "engine/engine.h"
#include "host/compute.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "model_loading.h"

namespace keel::cli {
namespace {

struct Workload {
  std::string name;
  std::vector<std::string> prompts;
};

std::vector<Workload> workloads() {
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

struct Row {
  std::vector<std::vector<int32_t>> outputs;  // per prompt
  double seconds = 0;
  int64_t generated = 0, steps = 0, drafted = 0, accepted = 0;
  double layers = 0;  // average layers per decode token that could exit; 0 = not early exit
  double perplexity = 0;
};

// Config of one row.
struct RowConfig {
  engine::SpeculativeParams spec;
  bool early_exit = false;
  float threshold = 0.5f;  // the predictors' exit threshold
};

// exp(mean NLL) of each output token given the prompt and the output before it, at full depth.
Result<double> perplexity(const model::Model& m, kernels::Ops& ops,
                          const std::vector<std::vector<int32_t>>& prompts, const Row& row) {
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

class Sink final : public engine::OutputSink {
 public:
  void on_event(engine::TokenEvent ev) override {
    std::lock_guard lock(mu_);
    tokens_.insert(tokens_.end(), ev.tokens.begin(), ev.tokens.end());
    if (ev.finish) {
      done_ = true;
      cv_.notify_all();
    }
  }
  std::vector<int32_t> wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return done_; });
    return tokens_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int32_t> tokens_;
  bool done_ = false;
};

Result<Row> run(const LoadedModel& loaded, const host::ComputeSetup& setup,
                const EvalSpecOptions& opts, const std::vector<std::vector<int32_t>>& prompts,
                const RowConfig& config) {
  engine::EngineConfig c;
  c.threads = setup.threads;
  c.isa = setup.isa;
  c.eog_token_ids.assign(loaded.tokenizer->eog_ids().begin(), loaded.tokenizer->eog_ids().end());
  c.speculative = config.spec;
  c.draft_head_path = opts.draft_head_path;
  c.exit_predictors_path = opts.exit_predictors_path;
  c.early_exit.enabled = config.early_exit;
  c.early_exit.threshold = config.threshold;
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> e, engine::Engine::start(*loaded.model, c));
  Row row;
  for (const std::vector<int32_t>& p : prompts) {
    engine::GenerationRequest r;
    r.prompt_tokens = p;
    r.max_tokens = opts.max_tokens;
    r.ignore_eos = true;
    r.sampling.temperature = 0.0f;
    auto sink = std::make_shared<Sink>();
    const auto t0 = std::chrono::steady_clock::now();
    KEEL_TRY(e->submit(std::move(r), sink).status());
    row.outputs.push_back(sink->wait());
    row.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  e->drain(std::chrono::seconds(10));
  const engine::EngineStats s = e->stats();
  row.generated = s.generation_tokens_total;
  row.steps = s.steps_total;
  row.drafted = s.spec_drafted_tokens;
  row.accepted = s.spec_accepted_tokens;
  const engine::MetricsSnapshot m = e->metrics();
  if (config.early_exit && m.early_exit_layers.count > 0) {
    row.layers = m.early_exit_layers.sum / static_cast<double>(m.early_exit_layers.count);
  }
  ThreadPool ppl_pool(1);
  kernels::Ops ops(setup.isa, &ppl_pool);
  KEEL_ASSIGN_OR_RETURN(row.perplexity, perplexity(*loaded.model, ops, prompts, row));
  return row;
}

double agreement(const Row& row, const Row& reference) {
  int64_t same = 0, total = 0;
  for (size_t i = 0; i < reference.outputs.size(); ++i) {
    const std::vector<int32_t>& a = reference.outputs[i];
    const std::vector<int32_t>& b = row.outputs[i];
    for (size_t j = 0; j < a.size(); ++j) same += j < b.size() && a[j] == b[j];
    total += static_cast<int64_t>(a.size());
  }
  return total > 0 ? static_cast<double>(same) / static_cast<double>(total) : 0.0;
}

void print(const EvalSpecOptions& opts, const std::string& workload, const std::string& config,
           const Row& row, const Row& reference) {
  const double acceptance =
      row.drafted > 0 ? static_cast<double>(row.accepted) / static_cast<double>(row.drafted) : 0;
  const double per_step = static_cast<double>(row.generated) / std::max<double>(row.steps, 1);
  const double tps = static_cast<double>(row.generated) / std::max(row.seconds, 1e-9);
  const double speedup =
      (tps / (static_cast<double>(reference.generated) / std::max(reference.seconds, 1e-9)));
  if (opts.json) {
    const nlohmann::json j = {{"workload", workload},
                              {"config", config},
                              {"k", opts.k},
                              {"token_agreement", agreement(row, reference)},
                              {"drafted_tokens", row.drafted},
                              {"accepted_tokens", row.accepted},
                              {"acceptance_rate", acceptance},
                              {"tokens_per_step", per_step},
                              {"generated_tokens", row.generated},
                              {"tokens_per_second", tps},
                              {"speedup", speedup},
                              {"perplexity", row.perplexity},
                              {"avg_layers", row.layers}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("| %s | %s | %.4f | %.3f | %s | %lld | %.3f | %.3f | %.0f | %.2fx |\n",
              workload.c_str(), config.c_str(), agreement(row, reference), row.perplexity,
              row.layers > 0 ? std::to_string(row.layers).substr(0, 5).c_str() : "full",
              static_cast<long long>(row.drafted), acceptance, per_step, tps, speedup);
}

// Each layer predictor's held-out accuracy, as keel train-exit stored it (nothing without a file).
Status print_predictor_accuracy(const EvalSpecOptions& opts, const model::Model& m) {
  const std::string path = opts.exit_predictors_path.empty()
                               ? draft::default_exit_path(m.file().path())
                               : opts.exit_predictors_path;
  Result<draft::ExitPredictorFile> f = draft::load_exit_predictors(path, m);
  if (!f.ok()) return Status();  // reported with the skipped rows
  nlohmann::json acc = nlohmann::json::array();
  for (float a : f->accuracy) acc.push_back(a);
  if (opts.json) {
    std::printf("%s\n", nlohmann::json{{"predictor_accuracy", acc},
                                       {"calibration_exits", f->predictors.exit_counts}}
                            .dump()
                            .c_str());
    return Status();
  }
  std::printf("\npredictor held-out accuracy per layer:");
  for (float a : f->accuracy) std::printf(" %.4f", a);
  std::printf("\ncalibration exits per layer (last = full depth):");
  for (int64_t c : f->predictors.exit_counts) std::printf(" %lld", static_cast<long long>(c));
  std::printf("\n");
  return Status();
}

Status evaluate(const EvalSpecOptions& opts, const host::ComputeSetup& setup) {
  ThreadPool pool(setup.threads);
  KEEL_ASSIGN_OR_RETURN(LoadedModel loaded,
                        load_model(opts.model_path, opts.compute, model::ModelOptions{}, pool));
  if (!opts.json) {
    std::printf(
        "| workload | config | token agreement | perplexity | avg layers | drafted | "
        "acceptance rate | tokens/step | tokens/s | speed-up |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n");
  }
  for (const Workload& w : workloads()) {
    std::vector<std::vector<int32_t>> prompts;
    for (const std::string& text : w.prompts) {
      prompts.push_back(loaded.tokenizer->encode(text, /*add_special=*/true, false));
    }
    KEEL_ASSIGN_OR_RETURN(const Row ar, run(loaded, setup, opts, prompts, RowConfig{}));
    const engine::SpeculativeParams ngram{engine::SpecMethod::kNgram, opts.k, opts.ngram_max,
                                          opts.ngram_min};
    KEEL_TRY(ngram.validate());
    KEEL_ASSIGN_OR_RETURN(const Row spec, run(loaded, setup, opts, prompts, RowConfig{ngram}));
    print(opts, w.name, "autoregressive", ar, ar);
    print(opts, w.name, "ngram k=" + std::to_string(opts.k), spec, ar);
    const engine::SpeculativeParams head{engine::SpecMethod::kDraftHead, opts.k, opts.ngram_max,
                                         opts.ngram_min};
    Result<Row> drafted = run(loaded, setup, opts, prompts, RowConfig{head});
    if (!drafted.ok()) {
      std::fprintf(stderr, "keel: draft-head rows skipped: %s\n",
                   drafted.error().message().c_str());
      continue;
    }
    print(opts, w.name, "draft-head k=" + std::to_string(opts.k), *drafted, ar);
    for (float t : opts.exit_thresholds) {
      Result<Row> exits = run(loaded, setup, opts, prompts, RowConfig{{}, true, t});
      if (!exits.ok()) {
        std::fprintf(stderr, "keel: early-exit rows skipped: %s\n",
                     exits.error().message().c_str());
        break;
      }
      const std::string name = "early exit t=" + std::to_string(t).substr(0, 4);
      print(opts, w.name, name, *exits, ar);
      KEEL_ASSIGN_OR_RETURN(const Row both,
                            run(loaded, setup, opts, prompts, RowConfig{head, true, t}));
      print(opts, w.name, name + " + draft-head k=" + std::to_string(opts.k), both, ar);
    }
  }
  return print_predictor_accuracy(opts, *loaded.model);
}

}  // namespace

int run_eval_spec(const EvalSpecOptions& opts) {
  auto setup = host::setup_compute(opts.compute);
  if (!setup.ok()) return report_error(setup.status());
  const Status s = evaluate(opts, *setup);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
