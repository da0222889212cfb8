// `keel eval sparse`: the flags to eval::SparseEvalConfig, the model loaded (model_loading.h), the
// harness run (eval/sparse_eval.h: sparse-decode policies against dense decoding on long
// model-written generations, teacher-forced) and its results printed: a markdown table, or one
// JSON object per policy (--json).
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/thread_pool.h"
#include "eval/sparse_eval.h"
#include "host/compute.h"
#include "model_loading.h"

namespace keel::cli {
namespace {

const eval::SparseEvalConfig& sparse_eval_config(const EvalSparseOptions& opts) { return opts; }

void print_sparse_result(const EvalSparseOptions& opts, int32_t generated,
                         const eval::SparsePolicyResult& r) {
  if (opts.json) {
    nlohmann::json curve = nlohmann::json::array();
    for (int c = 0; c < eval::kSparseCurvePoints; ++c) {
      curve.push_back({{"generated_tokens", r.curve_tokens[c]}, {"pages_held", r.curve_pages[c]}});
    }
    nlohmann::json quarters = nlohmann::json::array();
    for (int q = 0; q < eval::kSparseQuarters; ++q) quarters.push_back(r.ms_per_token[q]);
    const nlohmann::json j = {{"policy", r.policy},
                              {"budget", opts.budget},
                              {"page_size", opts.page_size},
                              {"top1_agreement", r.top1_agreement},
                              {"kl", r.kl},
                              {"max_pages_held", r.max_pages_held},
                              {"prefill_pages", r.prefill_pages},
                              {"final_pages_held", r.final_pages_held},
                              {"generated_tokens", generated},
                              {"pages_held_curve", curve},
                              {"ms_per_token_by_quarter", quarters},
                              {"generations", r.generations}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("| %s | %d | %.3f | %.4f | %d | %d | %.1f | %.3f | %.3f |\n", r.policy.c_str(),
              opts.budget, r.top1_agreement, r.kl, r.prefill_pages, r.max_pages_held,
              r.final_pages_held, r.ms_per_token[0], r.ms_per_token[eval::kSparseQuarters - 1]);
}

Status evaluate_sparse(const EvalSparseOptions& opts, const host::ComputeSetup& setup) {
  ThreadPool pool(setup.threads);
  KEEL_ASSIGN_OR_RETURN(LoadedModel loaded,
                        load_model(opts.model_path, opts.compute, model::ModelOptions{}, pool));
  kernels::Ops ops(setup.isa, &pool);
  KEEL_ASSIGN_OR_RETURN(
      const eval::SparseEvalReport report,
      eval::run_sparse_eval(*loaded.model, *loaded.tokenizer, ops, sparse_eval_config(opts)));
  if (!opts.json) {
    std::printf(
        "| policy | budget L | top-1 agreement | KL (nats) | prefill pages | max pages held | "
        "pages held at the end (of %d generated tokens) | ms/token, first quarter | ms/token, "
        "last quarter |\n|---|---|---|---|---|---|---|---|---|\n",
        report.generated_tokens);
  }
  for (const eval::SparsePolicyResult& r : report.policies) {
    print_sparse_result(opts, report.generated_tokens, r);
  }
  return Status();
}

}  // namespace

int run_eval_sparse(const EvalSparseOptions& opts) {
  auto setup = host::setup_compute(opts.compute);
  if (!setup.ok()) return report_error(setup.status());
  const Status s = evaluate_sparse(opts, *setup);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
