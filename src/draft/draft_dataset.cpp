// build_draft_dataset (see draft_dataset.h).
#include "draft/draft_dataset.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "draft/dataset_sampling.h"
#include "model/batch.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "sampling/rng.h"
#include "sampling/sampler.h"

namespace keel::draft {
namespace {

// One sequence (see draft_dataset.h): appends its features to *features and returns its tokens.
Result<std::vector<int32_t>> run_sequence(model::Context& ctx, model::KvStorage& kv,
                                          kernels::Ops& ops, const std::vector<int32_t>& table,
                                          const DraftDataSpec& spec, int64_t index, int32_t max_len,
                                          int32_t n_vocab, std::vector<float>* features) {
  uint64_t len_state = derive_seed(spec.seed, index, 1);
  const int32_t prefix =
      spec.min_prefix +
      static_cast<int32_t>(sampling::splitmix64_next(&len_state) %
                           static_cast<uint64_t>(spec.max_prefix - spec.min_prefix + 1));
  KEEL_ASSIGN_OR_RETURN(
      sampling::Sampler head,
      sampling::Sampler::create(sampled(1.0f, derive_seed(spec.seed, index, 2)), n_vocab));
  const float cont_temp = index % 2 == 0 ? 0.0f : spec.temperature;
  KEEL_ASSIGN_OR_RETURN(
      sampling::Sampler tail,
      sampling::Sampler::create(sampled(cont_temp, derive_seed(spec.seed, index, 3)), n_vocab));
  std::vector<int32_t> toks = {spec.bos};
  std::vector<float> logits, hidden;
  while (static_cast<int32_t>(toks.size()) < max_len) {
    model::Batch b;
    const int32_t seq = b.add_seq(table);
    b.add(toks.back(), static_cast<int32_t>(toks.size()) - 1, seq, true);
    KEEL_TRY(ctx.forward(b, kv, ops, &logits, &hidden));
    features->insert(features->end(), hidden.begin(), hidden.end());
    sampling::Sampler& s = static_cast<int32_t>(toks.size()) <= prefix ? head : tail;
    const int32_t next = s.sample(logits);
    head.accept(next);
    tail.accept(next);
    toks.push_back(next);
    if (std::find(spec.stop_ids.begin(), spec.stop_ids.end(), next) != spec.stop_ids.end()) break;
  }
  return toks;
}

}  // namespace

Status DraftDataSpec::validate() const {
  if (tokens < 1) return Status::invalid_argument("--tokens must be at least 1");
  if (seq_len < 3) return Status::invalid_argument("sequence length must be at least 3");
  if (min_prefix < 0 || max_prefix < min_prefix) {
    return Status::invalid_argument("prefix lengths must satisfy 0 ≤ min ≤ max");
  }
  if (!(temperature >= 0.0f)) return Status::invalid_argument("temperature must be ≥ 0");
  return Status();
}

Result<DraftDataset> build_draft_dataset(const model::Model& model, const DraftDataSpec& spec,
                                         kernels::Ops& ops, const DraftDataProgress& progress) {
  KEEL_TRY(spec.validate());
  const model::HParams& hp = model.hparams();
  const auto n_vocab = static_cast<int32_t>(hp.n_vocab);
  if (spec.bos < 0 || spec.bos >= n_vocab) {
    return Status::invalid_argument("BOS id " + std::to_string(spec.bos) +
                                    " is outside the vocabulary");
  }
  const auto max_len = static_cast<int32_t>(std::min<int64_t>(spec.seq_len, model.n_ctx()));
  if (max_len < 3) return Status::invalid_argument("the model's context is too short");
  const int32_t blocks = (max_len + kDatasetKvBlock - 1) / kDatasetKvBlock;
  KEEL_ASSIGN_OR_RETURN(model::KvStorage kv,
                        model::KvStorage::create(
                            model::KvLayout::for_model(hp, kDatasetKvBlock, DType::kF32), blocks));
  model::Context ctx(model, 1);
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  std::iota(table.begin(), table.end(), 0);
  DraftDataset out;
  out.n_embd = hp.n_embd;
  while (static_cast<int64_t>(out.pairs.size()) < spec.tokens) {
    const int64_t first_row = static_cast<int64_t>(out.features.size()) / hp.n_embd;
    KEEL_ASSIGN_OR_RETURN(std::vector<int32_t> toks,
                          run_sequence(ctx, kv, ops, table, spec, out.num_sequences, max_len,
                                       n_vocab, &out.features));
    ++out.num_sequences;
    const auto n = static_cast<int64_t>(toks.size()) - 1;  // features f_0 … f_{n-1}
    for (int64_t p = 0; p + 2 <= n && static_cast<int64_t>(out.pairs.size()) < spec.tokens; ++p) {
      out.pairs.push_back(
          {first_row + p, toks[static_cast<size_t>(p + 1)], toks[static_cast<size_t>(p + 2)]});
    }
    if (progress) progress(static_cast<int64_t>(out.pairs.size()), spec.tokens);
    if (out.num_sequences > spec.tokens + 16) {
      return Status::internal("the model ends every sequence at once: no training pairs");
    }
  }
  return out;
}

}  // namespace keel::draft
