// Text the model writes itself, for the evaluation harnesses (`keel eval`): BOS then tokens sampled
// from the model (temperature 0.8, top-k 40, seeded), never BOS or EOS again — so an evaluation
// needs no dataset and every prompt is in the model's own distribution.
//
// Thread safety: uses the given Context, KV storage and ops; one caller at a time.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"
#include "kernels/kernels.h"
#include "model/context.h"
#include "model/kv_storage.h"

namespace keel::eval {

struct TextSpec {
  int32_t bos = 1;
  int32_t eos = 2;
  int32_t n_vocab = 0;  // the model's
};

// n tokens (BOS included), computed in `table`'s blocks (overwritten), seeded by `seed`.
Result<std::vector<int32_t>> model_written_tokens(model::Context& ctx, model::KvStorage& kv,
                                                  kernels::Ops& ops, std::span<const int32_t> table,
                                                  TextSpec special, uint64_t seed, int32_t n);

// The most likely token of `logits` other than BOS and EOS.
int32_t argmax_excluding(std::vector<float> logits, TextSpec special);

}  // namespace keel::eval
