// The harness of `keel eval kv`: KV cache element types (f32, f16, q8_0) against f32 KV on one
// model. For each of `prompts` sequences (fixed seed) the model writes `max_len` tokens itself
// (model_text.h). Each KV type then (1) teacher-forces the sequence — its first `prompt_len` tokens
// as one prefill, the rest one decode step at a time, as the engine serves them — and is compared
// with f32 KV at every decode step: top-1 agreement, KL(f32 ‖ type), the largest |Δlogit|, and the
// perplexity of the written text; (2) decodes `greedy` tokens greedily from the prompt, compared id
// by id with f32 KV's greedy ids (ids equal at the same position, and the length of the shared
// prefix). Also the KV bytes per token and their ratio to f16.
//
// Thread safety: run_kv_eval uses `ops` (and its pool) alone for its duration.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace keel::eval {

struct KvEvalConfig {
  int32_t prompts = 8;      // model-written sequences
  int32_t prompt_len = 32;  // prefilled tokens, BOS included
  int32_t max_len = 256;    // teacher-forced sequence length; 0 = the model's context
  int32_t greedy = 64;      // greedy ids generated after each prompt
  uint64_t seed = 1;
  std::vector<std::string> kv_types = {"f16", "q8_0"};  // compared with f32 (always run)
};

// One KV type against f32 KV.
struct KvTypeResult {
  DType type = DType::kF32;
  size_t bytes_per_token = 0;
  double ratio_to_f16 = 0;          // bytes_per_token / f16's
  double top1_agreement = 0;        // forced steps whose argmax equals f32 KV's
  double kl = 0;                    // mean KL(f32 ‖ type) per forced step, nats
  double max_abs_dlogit = 0;        // over every forced step and logit
  double perplexity = 0;            // of the written text after the prompt
  double greedy_agreement = 0;      // greedy ids equal to f32 KV's at the same position
  double greedy_shared_prefix = 0;  // per sequence
  int sequences = 0;
  int64_t forced_steps = 0;
};

// f32 first (the reference, compared with itself), then each other type of `config` in its order
// (f32 listed again is not repeated). InvalidArgument, naming the `keel eval kv` flags, if max_len
// is outside [prompt_len + 2, the model's context] or prompt_len + greedy exceeds the context, or
// a KV type is unknown.
Result<std::vector<KvTypeResult>> run_kv_eval(const model::Model& model,
                                              const tokenizer::Tokenizer& tok, kernels::Ops& ops,
                                              const KvEvalConfig& config);

}  // namespace keel::eval
