// The harness of `keel eval spec`: speculative decoding against autoregressive decoding on one
// model, through the engine itself (docs/speculative.md). Per workload (by default "stories",
// short story openings the model continues, and "repetitive", openings that repeat a sentence,
// where prompt lookup shines) and configuration — autoregressive, n-gram speculation, draft-model
// speculation (with draft_model_path), draft-head speculation (the head at draft_head_path, or the
// one beside the model) — each prompt is decoded
// greedily (max_tokens, EOS ignored) one request at a time on a fresh engine, and the row reports:
// token agreement with autoregressive greedy decoding (ids equal at the same position), the
// acceptance rate (accepted / drafted), tokens per decode step (generated tokens over the engine
// steps that produced them, the prefill step included) and tokens per second (generated tokens
// over the wall time from submit to the last token, summed over prompts). SpecEE early exit (the
// exit predictors beside the model, or exit_predictors_path) adds two rows per threshold: early
// exit alone and early exit with draft-head speculation, with the perplexity of the generated text
// under the full-depth model (teacher forcing) and the average layers executed per emitted token
// whose row could exit; and each layer predictor's held-out accuracy as keel train-exit stored it.
//
// Thread safety: run_spec_eval starts its own engines; the model and tokenizer are only read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/status.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace keel::eval {

// Prompts (text, encoded with BOS) evaluated together under one name.
struct SpecWorkload {
  std::string name;
  std::vector<std::string> prompts;
};

// The built-in workloads: "stories" and "repetitive", six prompts each.
std::vector<SpecWorkload> default_spec_workloads();

struct SpecEvalConfig {
  std::vector<SpecWorkload> workloads = default_spec_workloads();
  int32_t max_tokens = 128;  // greedy tokens per prompt
  int32_t k = 4;             // drafted tokens per step
  int32_t ngram_max = 3;
  int32_t ngram_min = 1;
  std::string draft_head_path;       // "" = the default file beside the model (draft-head rows)
  std::string draft_model_path;      // "" = no draft-model rows
  std::string exit_predictors_path;  // "" = the default file beside the model (early-exit rows)
  std::vector<float> exit_thresholds = {0.5f, 0.95f};  // one early-exit row pair per threshold
};

// One configuration on one workload.
struct SpecRow {
  std::string workload;
  // "autoregressive", "ngram k=4", "draft-model k=4", "draft-head k=4", "early exit t=0.50", …
  std::string config;
  std::vector<std::vector<int32_t>> outputs;  // greedy ids per prompt
  double seconds = 0;                         // submit → last token, summed over prompts
  int64_t generated = 0, steps = 0, drafted = 0, accepted = 0;
  double layers = 0;  // average layers per decode token that could exit; 0 = not early exit
  double perplexity = 0;
  // Against the workload's autoregressive row (the reference):
  double token_agreement = 0;    // ids equal at the same position / reference ids
  double acceptance_rate = 0;    // accepted / drafted; 0 without drafts
  double tokens_per_step = 0;    // generated / max(steps, 1)
  double tokens_per_second = 0;  // generated / seconds
  double speedup = 0;            // tokens_per_second / the reference's
};

// Held-out accuracy of each layer predictor and the calibration exits, as keel train-exit stored.
struct ExitPredictorAccuracy {
  std::vector<float> accuracy;       // [n_layer − 1]
  std::vector<int64_t> exit_counts;  // [n_layer]; the last is full depth
};

struct SpecEvalReport {
  std::vector<SpecRow> rows;  // per workload: autoregressive, ngram, then the rows that ran
  // Why rows were left out ("draft-head rows skipped: …", "early-exit rows skipped: …").
  std::vector<std::string> skipped;
  std::optional<ExitPredictorAccuracy> predictor_accuracy;  // none without a predictor file
};

// Token agreement of `row` with `reference` (ids equal at the same position / reference ids).
[[nodiscard]] double token_agreement(const SpecRow& row, const SpecRow& reference);

// Runs every workload and configuration, each row's engine on `threads` threads with the `isa`
// kernel table. Draft-head and early-exit rows that cannot start (no head or predictor file) are
// left out and named in `skipped`; other errors (a draft model that cannot be loaded or whose
// vocabulary differs included) fail the run.
Result<SpecEvalReport> run_spec_eval(const model::Model& model, const tokenizer::Tokenizer& tok,
                                     kernels::Isa isa, int threads, const SpecEvalConfig& config);

}  // namespace keel::eval
