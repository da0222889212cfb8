// The predictor's training data: prompts and how many tokens the served model generates for each.
// Sample `index` is a pure function of (DatasetSpec, index, the two models):
//   prompt  BOS + story text written by the writer model (the predictor's side model) itself —
//           temperature 0.8, top-k 40, never BOS/EOS — of a length in [min, max] prompt tokens,
//           both drawn from seeds derived from (spec.seed, index);
//   label   the served model prefills the prompt and samples (spec.temperature / top_k, seeded
//           from (spec.seed, index); temperature 0 = greedy) until it emits a stop token, its
//           context is full, or max_new_tokens were generated; the label counts the tokens
//           before the stop token. Stop tokens: EOS and BOS — llama2.c models (stories260K) mark
//           the end of a story with BOS, and any model that starts a new document has ended this
//           one.
// The held-out split is fixed by index: index % heldout_every == heldout_every − 1.
//
// Thread safety: a DatasetBuilder owns its contexts and KV storage and borrows the models and the
// ops; one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/result.h"
#include "kernels/kernels.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "model/model.h"

namespace keel::predictor {

struct DatasetSpec {
  int32_t num_prompts = 2000;       // samples [0, num_prompts)
  int32_t min_prompt_tokens = 4;    // BOS included
  int32_t max_prompt_tokens = 250;  // BOS included
  int32_t max_new_tokens = 256;     // the label cap
  float temperature = 0.0f;         // the served model's sampling; 0 = greedy
  int32_t top_k = 40;               // 0 = off
  uint64_t seed = 1;
  int32_t heldout_every = 5;  // 1 in heldout_every samples is held out (index-fixed)

  [[nodiscard]] Status validate() const;
  [[nodiscard]] bool is_heldout(int32_t index) const {
    return index % heldout_every == heldout_every - 1;
  }
};

struct LengthSample {
  int32_t index = 0;
  std::vector<int32_t> prompt;  // BOS first
  int32_t generated = 0;        // tokens the served model generated (the label)
};

// The model's special tokens the builder needs.
struct SpecialTokens {
  int32_t bos = 1;
  int32_t eos = 2;
};

class DatasetBuilder {
 public:
  // `writer` writes the prompts, `served` generates the labels; they must share a vocabulary
  // (same n_vocab; InvalidArgument otherwise). Both, and `ops`, are borrowed for the builder's
  // lifetime.
  static Result<std::unique_ptr<DatasetBuilder>> create(const DatasetSpec& spec,
                                                        const model::Model& writer,
                                                        const model::Model& served,
                                                        SpecialTokens special, kernels::Ops& ops);

  [[nodiscard]] const DatasetSpec& spec() const { return spec_; }

  // Sample `index` (see the file comment).
  Result<LengthSample> sample(int32_t index);
  // Samples of the given indices, in order; `progress` (may be empty) after each.
  Result<std::vector<LengthSample>> samples(const std::vector<int32_t>& indices,
                                            const std::function<void(size_t, size_t)>& progress);

 private:
  struct Side {  // one model with its forward context and one sequence's KV blocks
    const model::Model* model;
    std::unique_ptr<model::Context> ctx;
    std::unique_ptr<model::KvStorage> kv;
    std::vector<int32_t> table;
  };
  DatasetBuilder(const DatasetSpec& spec, SpecialTokens special, kernels::Ops& ops)
      : spec_(spec), special_(special), ops_(ops) {}
  static Result<Side> make_side(const model::Model& m, int64_t max_batch);
  Result<std::vector<int32_t>> write_prompt(int32_t index);
  Result<int32_t> generate(const std::vector<int32_t>& prompt, int32_t index);

  DatasetSpec spec_;
  SpecialTokens special_;
  kernels::Ops& ops_;
  Side writer_;
  Side served_;
};

// Indices [0, spec.num_prompts) of the training part (held_out = false) or the held-out part.
std::vector<int32_t> split_indices(const DatasetSpec& spec, bool held_out);

}  // namespace keel::predictor
