// The draft head's training data: the target model's own text and hidden states. Sequence s is a
// pure function of (DraftDataSpec, s, the model): BOS, a prefix of `prefix` tokens sampled at
// temperature 1 (top-k 40; `prefix` drawn in [min_prefix, max_prefix]), then a continuation that
// is greedy for even s and sampled at `temperature` (top-k 40) for odd s — the two ways requests
// decode — until a stop token, seq_len tokens or the context. Every token is fed one at a time
// (as decoding does) and the final hidden state after the output norm of each position is kept
// (model::Context::forward with `hidden`).
// A pair (position p of a sequence t_0 … t_n with features f_0 … f_{n-1}) is
//   input (f_p, t_{p+1}) → label t_{p+2}, with f_{p+1} the feature the head should predict,
// for p in [0, n − 2]. Sequences are added until `tokens` pairs exist (the last one is cut).
// Thread safety: build_draft_dataset() borrows the model and the ops; one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/result.h"
#include "kernels/kernels.h"
#include "model/model.h"

namespace keel::draft {

struct DraftDataSpec {
  int64_t tokens = 32768;  // training pairs wanted
  int32_t seq_len = 256;   // tokens per sequence at most (BOS included)
  int32_t min_prefix = 4;  // sampled prefix tokens after BOS
  int32_t max_prefix = 24;
  float temperature = 0.8f;  // odd sequences' continuation
  uint64_t seed = 1;
  int32_t bos = 1;                // the first token of every sequence
  std::vector<int32_t> stop_ids;  // a sequence ends when one is sampled (kept as a label)

  [[nodiscard]] Status validate() const;
};

struct DraftPair {
  int64_t row = 0;    // f_p = features[row], f_{p+1} = features[row + 1]
  int32_t token = 0;  // t_{p+1}
  int32_t label = 0;  // t_{p+2}
};

struct DraftDataset {
  int64_t n_embd = 0;
  std::vector<float> features;  // [rows][n_embd]
  std::vector<DraftPair> pairs;
  int64_t num_sequences = 0;
};

// Called after each sequence with (pairs so far, pairs wanted).
using DraftDataProgress = std::function<void(int64_t done, int64_t total)>;

[[nodiscard]] Result<DraftDataset> build_draft_dataset(const model::Model& model,
                                                       const DraftDataSpec& spec, kernels::Ops& ops,
                                                       const DraftDataProgress& progress = {});

}  // namespace keel::draft
