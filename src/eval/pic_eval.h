// The harness of `keel eval pic`: EPIC's accuracy/speed trade-off on one model. For each of
// `prompts` prompts (fixed seed), the model itself writes `chunks` story chunks (model_text.h,
// sampled from BOS: each chunk keeps its own BOS, as EPIC does) and a query; every chunk is
// compiled alone (its KV at positions 0..len-1). The reference is full recompute: a full prefill,
// then `continuation` greedy tokens. Each variant prefills the same prompt through the link
// (engine::pic_prefill) and is then teacher-forced along the reference continuation: per step,
// KL(reference ‖ variant) of the next-token distributions and top-1 agreement; free-running, the
// length of its greedy output that matches the reference; recompute fraction = positions computed
// / prompt tokens; TTFT = wall time of the variant's prefill with the chunks already compiled
// (link + recompute + the probe for CacheBlend).
//
// Thread safety: run_pic_eval uses `ops` (and its pool) alone for its duration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/status.h"
#include "kernels/kernels.h"
#include "kv/pic.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace keel::eval {

struct PicEvalConfig {
  int32_t prompts = 16;
  int32_t chunks = 4;         // chunks per prompt (each with its own BOS)
  int32_t chunk_len = 48;     // tokens per chunk, BOS included
  int32_t query_len = 8;      // tokens after the last chunk
  int32_t continuation = 32;  // greedy tokens compared
  uint64_t seed = 1;
  std::vector<std::string> variants = {"full",          "naive",         "legolink-1",
                                       "legolink-2",    "legolink-4",    "legolink-8",
                                       "legolink-16",   "cacheblend-5",  "cacheblend-10",
                                       "cacheblend-15", "cacheblend-30", "cacheblend-50"};
  // InvalidArgument if a variant does not parse (kv::PicVariant::parse).
  [[nodiscard]] Status validate() const;
};

// One variant, averaged over the prompts.
struct PicVariantResult {
  kv::PicVariant variant;
  int32_t k = 0;                   // LegoLink's k, CacheBlend's percent, else 0
  double top1_agreement = 0;       // teacher-forced steps whose argmax equals the reference's
  double kl = 0;                   // mean KL(reference ‖ variant) per step, nats
  double greedy_match_tokens = 0;  // free-running greedy ids equal to the reference's prefix
  double recompute_fraction = 0;   // positions computed / prompt tokens
  double ttft_ms = 0;              // the variant's prefill, chunks already compiled
  int prompts = 0;
};

// Every variant of `config`, in its order. OutOfRange if a prompt and its continuation exceed the
// model's context.
Result<std::vector<PicVariantResult>> run_pic_eval(const model::Model& model,
                                                   const tokenizer::Tokenizer& tok,
                                                   kernels::Ops& ops, const PicEvalConfig& config);

}  // namespace keel::eval
