// The harness of `keel eval sparse`: sparse-decode policies against dense decoding on one model.
// For each of `prompts` generations (fixed seed) the model writes a `prompt_len` prompt itself
// (model_text.h), then dense decoding samples a continuation up to `max_len` (temperature 0.8,
// top-k 40): the reference sequence and, at every decode step, the reference next-token
// distribution. Each policy prefills the same prompt densely and is teacher-forced along the
// reference sequence through engine::SparseSelector — the code the engine runs — with the same
// budget L: per step KL(dense ‖ policy) and top-1 agreement; the pages it holds (prompt pages +
// decode pages not released) against the tokens generated; and the wall time of each decode step,
// reported per quarter of the generation.
//
// Thread safety: run_sparse_eval uses `ops` (and its pool) alone for its duration.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace keel::eval {

struct SparseEvalConfig {
  int32_t prompts = 8;      // generations
  int32_t prompt_len = 32;  // model-written prompt tokens, BOS included
  int32_t max_len = 0;      // prompt + generation; 0 = the model's context
  int32_t budget = 128;     // L, the same for every policy
  int32_t page_size = 16;   // tokens per KV page
  float alpha = 0.05f;      // RaaS
  int32_t sink = 4;         // StreamingLLM sink tokens
  int32_t window = 0;       // StreamingLLM / H2O window; 0 = from the budget
  int32_t dense_layers = 2;
  uint64_t seed = 1;
  std::vector<std::string> policies = {"dense", "streaming", "h2o", "quest", "raas"};
};

inline constexpr int kSparseQuarters = 4;     // decode time per quarter of the generation
inline constexpr int kSparseCurvePoints = 8;  // pages-held samples along the generation

// One policy, averaged over the generations where a mean is meant.
struct SparsePolicyResult {
  std::string policy;
  double top1_agreement = 0;  // forced steps whose argmax equals dense's
  double kl = 0;              // mean KL(dense ‖ policy) per step, nats
  int32_t prefill_pages = 0;
  int32_t max_pages_held = 0;   // over every step of every generation
  double final_pages_held = 0;  // after the last step
  // Pages held after (c + 1) / kSparseCurvePoints of the generated tokens.
  std::array<int32_t, kSparseCurvePoints> curve_tokens{};  // generated tokens at each point
  std::array<double, kSparseCurvePoints> curve_pages{};
  std::array<double, kSparseQuarters> ms_per_token{};  // mean decode step time per quarter
  int generations = 0;
};

struct SparseEvalReport {
  int32_t generated_tokens = 0;              // per generation: max_len (resolved) − prompt_len
  std::vector<SparsePolicyResult> policies;  // in the config's order
};

// InvalidArgument, naming the `keel eval sparse` flags, if max_len is outside
// [prompt_len + 2, the model's context] or the budget is below a page; errors of an unknown policy.
Result<SparseEvalReport> run_sparse_eval(const model::Model& model, const tokenizer::Tokenizer& tok,
                                         kernels::Ops& ops, const SparseEvalConfig& config);

}  // namespace keel::eval
