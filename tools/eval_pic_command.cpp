// `keel eval pic`: the flags to eval::PicEvalConfig, the model loaded (model_loading.h), the
// harness run (eval/pic_eval.h: EPIC variants against full recompute on model-written multi-chunk
// prompts) and its results printed: a markdown table, or one JSON object per variant (--json).
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/thread_pool.h"
#include "eval/pic_eval.h"
#include "host/compute.h"
#include "model_loading.h"

namespace keel::cli {
namespace {

const eval::PicEvalConfig& pic_eval_config(const EvalPicOptions& opts) { return opts; }

void print_pic_results(const EvalPicOptions& opts,
                       const std::vector<eval::PicVariantResult>& results) {
  if (!opts.json) {
    std::printf(
        "| variant | k | top-1 agreement | KL (nats) | greedy match (tokens of %d) | "
        "recompute fraction | TTFT (ms) |\n|---|---|---|---|---|---|---|\n",
        opts.continuation);
  }
  for (const eval::PicVariantResult& r : results) {
    if (opts.json) {
      const nlohmann::json j = {{"variant", r.variant.name()},
                                {"k", r.k},
                                {"top1_agreement", r.top1_agreement},
                                {"kl", r.kl},
                                {"greedy_match_tokens", r.greedy_match_tokens},
                                {"continuation_tokens", opts.continuation},
                                {"recompute_fraction", r.recompute_fraction},
                                {"ttft_ms", r.ttft_ms},
                                {"prompts", r.prompts}};
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("| %s | %d | %.3f | %.4f | %.1f | %.3f | %.2f |\n", r.variant.name().c_str(), r.k,
                  r.top1_agreement, r.kl, r.greedy_match_tokens, r.recompute_fraction, r.ttft_ms);
    }
  }
}

Status evaluate_pic(const EvalPicOptions& opts, const host::ComputeSetup& setup) {
  const eval::PicEvalConfig config = pic_eval_config(opts);
  KEEL_TRY(config.validate());
  ThreadPool pool(setup.threads);
  KEEL_ASSIGN_OR_RETURN(LoadedModel loaded,
                        load_model(opts.model_path, opts.compute, model::ModelOptions{}, pool));
  kernels::Ops ops(setup.isa, &pool);
  KEEL_ASSIGN_OR_RETURN(const std::vector<eval::PicVariantResult> results,
                        eval::run_pic_eval(*loaded.model, *loaded.tokenizer, ops, config));
  print_pic_results(opts, results);
  return Status();
}

}  // namespace

int run_eval_pic(const EvalPicOptions& opts) {
  auto setup = host::setup_compute(opts.compute);
  if (!setup.ok()) return report_error(setup.status());
  const Status s = evaluate_pic(opts, *setup);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
