// `keel eval spec`: the flags to eval::SpecEvalConfig, the model loaded (model_loading.h), the
// harness run (eval/spec_eval.h: speculative decoding against autoregressive decoding through the
// engine, docs/speculative.md) and its rows printed: a markdown table, or one JSON object per row
// (--json); after the table, each layer predictor's held-out accuracy as stored by keel
// train-exit. Rows that could not run are named on stderr.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "eval/spec_eval.h"
#include "host/compute.h"
#include "model_loading.h"

namespace keel::cli {
namespace {

eval::SpecEvalConfig spec_eval_config(const EvalSpecOptions& opts) {
  eval::SpecEvalConfig c;
  c.max_tokens = opts.max_tokens;
  c.k = opts.k;
  c.ngram_max = opts.ngram_max;
  c.ngram_min = opts.ngram_min;
  c.draft_head_path = opts.draft_head_path;
  c.draft_model_path = opts.draft_model_path;
  c.exit_predictors_path = opts.exit_predictors_path;
  c.exit_thresholds = opts.exit_thresholds;
  return c;
}

void print_spec_row(const EvalSpecOptions& opts, const eval::SpecRow& row) {
  if (opts.json) {
    const nlohmann::json j = {{"workload", row.workload},
                              {"config", row.config},
                              {"k", opts.k},
                              {"token_agreement", row.token_agreement},
                              {"drafted_tokens", row.drafted},
                              {"accepted_tokens", row.accepted},
                              {"acceptance_rate", row.acceptance_rate},
                              {"tokens_per_step", row.tokens_per_step},
                              {"generated_tokens", row.generated},
                              {"tokens_per_second", row.tokens_per_second},
                              {"speedup", row.speedup},
                              {"perplexity", row.perplexity},
                              {"avg_layers", row.layers}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("| %s | %s | %.4f | %.3f | %s | %lld | %.3f | %.3f | %.0f | %.2fx |\n",
              row.workload.c_str(), row.config.c_str(), row.token_agreement, row.perplexity,
              row.layers > 0 ? std::to_string(row.layers).substr(0, 5).c_str() : "full",
              static_cast<long long>(row.drafted), row.acceptance_rate, row.tokens_per_step,
              row.tokens_per_second, row.speedup);
}

void print_predictor_accuracy(const EvalSpecOptions& opts, const eval::ExitPredictorAccuracy& a) {
  if (opts.json) {
    nlohmann::json acc = nlohmann::json::array();
    for (float x : a.accuracy) acc.push_back(x);
    std::printf("%s\n",
                nlohmann::json{{"predictor_accuracy", acc}, {"calibration_exits", a.exit_counts}}
                    .dump()
                    .c_str());
    return;
  }
  std::printf("\npredictor held-out accuracy per layer:");
  for (float x : a.accuracy) std::printf(" %.4f", x);
  std::printf("\ncalibration exits per layer (last = full depth):");
  for (int64_t c : a.exit_counts) std::printf(" %lld", static_cast<long long>(c));
  std::printf("\n");
}

Status evaluate_spec(const EvalSpecOptions& opts, const host::ComputeSetup& setup) {
  ThreadPool pool(setup.threads);
  KEEL_ASSIGN_OR_RETURN(LoadedModel loaded,
                        load_model(opts.model_path, opts.compute, model::ModelOptions{}, pool));
  KEEL_ASSIGN_OR_RETURN(const eval::SpecEvalReport report,
                        eval::run_spec_eval(*loaded.model, *loaded.tokenizer, setup.isa,
                                            setup.threads, spec_eval_config(opts)));
  for (const std::string& why : report.skipped) std::fprintf(stderr, "keel: %s\n", why.c_str());
  if (!opts.json) {
    std::printf(
        "| workload | config | token agreement | perplexity | avg layers | drafted | "
        "acceptance rate | tokens/step | tokens/s | speed-up |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n");
  }
  for (const eval::SpecRow& row : report.rows) print_spec_row(opts, row);
  if (report.predictor_accuracy) print_predictor_accuracy(opts, *report.predictor_accuracy);
  return Status();
}

}  // namespace

int run_eval_spec(const EvalSpecOptions& opts) {
  auto setup = host::setup_compute(opts.compute);
  if (!setup.ok()) return report_error(setup.status());
  const Status s = evaluate_spec(opts, *setup);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
