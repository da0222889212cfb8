// `keel eval kv`: the flags to eval::KvEvalConfig, the model loaded (model_loading.h), the harness
// run (eval/kv_eval.h: KV cache element types against f32 KV on model-written sequences) and its
// results printed: a markdown table, or one JSON object per type (--json).
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/thread_pool.h"
#include "eval/kv_eval.h"
#include "host/compute.h"
#include "model/kv_type.h"
#include "model_loading.h"

namespace keel::cli {
namespace {

eval::KvEvalConfig kv_eval_config(const EvalKvOptions& opts) {
  eval::KvEvalConfig c;
  c.prompts = opts.prompts;
  c.prompt_len = opts.prompt_len;
  c.max_len = opts.max_len;
  c.greedy = opts.greedy;
  c.seed = opts.seed;
  c.kv_types = opts.kv_types;
  return c;
}

void print_kv_result(const EvalKvOptions& opts, const eval::KvTypeResult& r) {
  const std::string type(model::kv_type_name(r.type));
  if (opts.json) {
    const nlohmann::json j = {{"kv_type", type},
                              {"bytes_per_token", r.bytes_per_token},
                              {"ratio_to_f16", r.ratio_to_f16},
                              {"top1_agreement", r.top1_agreement},
                              {"kl", r.kl},
                              {"max_abs_dlogit", r.max_abs_dlogit},
                              {"perplexity", r.perplexity},
                              {"greedy_agreement", r.greedy_agreement},
                              {"greedy_shared_prefix", r.greedy_shared_prefix},
                              {"greedy_tokens", opts.greedy},
                              {"sequences", r.sequences},
                              {"forced_steps", r.forced_steps}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("| %s | %zu | %.3f | %.4f | %.2e | %.3g | %.4f | %.3f | %.1f |\n", type.c_str(),
              r.bytes_per_token, r.ratio_to_f16, r.top1_agreement, r.kl, r.max_abs_dlogit,
              r.perplexity, r.greedy_agreement, r.greedy_shared_prefix);
}

Status evaluate_kv(const EvalKvOptions& opts, const host::ComputeSetup& setup) {
  ThreadPool pool(setup.threads);
  KEEL_ASSIGN_OR_RETURN(LoadedModel loaded,
                        load_model(opts.model_path, opts.compute, model::ModelOptions{}, pool));
  kernels::Ops ops(setup.isa, &pool);
  KEEL_ASSIGN_OR_RETURN(
      const std::vector<eval::KvTypeResult> results,
      eval::run_kv_eval(*loaded.model, *loaded.tokenizer, ops, kv_eval_config(opts)));
  if (!opts.json) {
    std::printf(
        "| KV type | bytes/token | × f16 | top-1 agreement vs f32 KV | KL vs f32 KV (nats) | max "
        "\\|Δlogit\\| | perplexity | greedy ids = f32 KV's (%d per prompt) | shared greedy prefix "
        "|\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        opts.greedy);
  }
  for (const eval::KvTypeResult& r : results) print_kv_result(opts, r);
  return Status();
}

}  // namespace

int run_eval_kv(const EvalKvOptions& opts) {
  auto setup = host::setup_compute(opts.compute);
  if (!setup.ok()) return report_error(setup.status());
  const Status s = evaluate_kv(opts, *setup);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
