// DatasetBuilder (see dataset.h).
#include "predictor/dataset.h"

#include <numeric>
#include <string>

#include "model/batch.h"
#include "sampling/rng.h"
#include "sampling/sampler.h"
#include "sampling/softmax_math.h"

namespace keel::predictor {
namespace {

constexpr int32_t kDatasetBlock = 16;

// A seed for stream `stream` of sample `index`.
uint64_t derive_seed(uint64_t seed, int32_t index, uint64_t stream) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(index) * 1000003ull + stream;
  return sampling::splitmix64_next(&s);
}

// Runs `tokens` at positions start.. of the side's sequence; *logits = the last token's.
Status feed(model::Context& ctx, model::KvStorage& kv, kernels::Ops& ops,
            const std::vector<int32_t>& table, const std::vector<int32_t>& tokens, int32_t start,
            std::vector<float>* logits) {
  model::Batch b;
  const int32_t seq = b.add_seq(table);
  for (size_t i = 0; i < tokens.size(); ++i) {
    b.add(tokens[i], start + static_cast<int32_t>(i), seq, i + 1 == tokens.size());
  }
  return ctx.forward(b, kv, ops, logits);
}

}  // namespace

Status DatasetSpec::validate() const {
  if (num_prompts < 1) return Status::invalid_argument("--prompts must be ≥ 1");
  if (min_prompt_tokens < 2 || max_prompt_tokens < min_prompt_tokens) {
    return Status::invalid_argument("prompt lengths must satisfy 2 ≤ min ≤ max");
  }
  if (max_new_tokens < 1) return Status::invalid_argument("max new tokens must be ≥ 1");
  if (!(temperature >= 0.0f) || top_k < 0) {
    return Status::invalid_argument("temperature and top-k must be ≥ 0");
  }
  if (heldout_every < 2) return Status::invalid_argument("heldout_every must be ≥ 2");
  return Status();
}

std::vector<int32_t> split_indices(const DatasetSpec& spec, bool held_out) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < spec.num_prompts; ++i) {
    if (spec.is_heldout(i) == held_out) out.push_back(i);
  }
  return out;
}

Result<DatasetBuilder::Side> DatasetBuilder::make_side(const model::Model& m, int64_t max_batch) {
  Side s;
  s.model = &m;
  const auto blocks = static_cast<int32_t>((m.n_ctx() + kDatasetBlock - 1) / kDatasetBlock);
  KEEL_ASSIGN_OR_RETURN(
      model::KvStorage kv,
      model::KvStorage::create(model::KvLayout::for_model(m.hparams(), kDatasetBlock, DType::kF32),
                               blocks));
  s.kv = std::make_unique<model::KvStorage>(std::move(kv));
  s.ctx = std::make_unique<model::Context>(m, max_batch);
  s.table.resize(static_cast<size_t>(blocks));
  std::iota(s.table.begin(), s.table.end(), 0);
  return s;
}

Result<std::unique_ptr<DatasetBuilder>> DatasetBuilder::create(const DatasetSpec& spec,
                                                               const model::Model& writer,
                                                               const model::Model& served,
                                                               SpecialTokens special,
                                                               kernels::Ops& ops) {
  KEEL_TRY(spec.validate());
  if (writer.hparams().n_vocab != served.hparams().n_vocab) {
    return Status::invalid_argument(
        "the predictor model and the served model must share a vocabulary (n_vocab " +
        std::to_string(writer.hparams().n_vocab) + " vs " +
        std::to_string(served.hparams().n_vocab) + ")");
  }
  if (spec.max_prompt_tokens >= writer.n_ctx() || spec.max_prompt_tokens >= served.n_ctx()) {
    return Status::invalid_argument("prompts of up to " + std::to_string(spec.max_prompt_tokens) +
                                    " tokens do not fit the models' contexts");
  }
  std::unique_ptr<DatasetBuilder> b(new DatasetBuilder(spec, special, ops));
  KEEL_ASSIGN_OR_RETURN(b->writer_, make_side(writer, 1));
  KEEL_ASSIGN_OR_RETURN(b->served_, make_side(served, spec.max_prompt_tokens));
  return b;
}

Result<std::vector<int32_t>> DatasetBuilder::write_prompt(int32_t index) {
  uint64_t len_state = derive_seed(spec_.seed, index, 1);
  const int32_t span = spec_.max_prompt_tokens - spec_.min_prompt_tokens + 1;
  const int32_t n =
      spec_.min_prompt_tokens + static_cast<int32_t>(sampling::splitmix64_next(&len_state) % span);
  sampling::SamplingParams sp;
  sp.temperature = 0.8f;
  sp.top_k = 40;
  sp.seed = derive_seed(spec_.seed, index, 2);
  const auto n_vocab = static_cast<int32_t>(writer_.model->hparams().n_vocab);
  KEEL_ASSIGN_OR_RETURN(sampling::Sampler sampler, sampling::Sampler::create(sp, n_vocab));
  std::vector<int32_t> toks = {special_.bos};
  std::vector<float> logits;
  while (static_cast<int32_t>(toks.size()) < n) {
    KEEL_TRY(feed(*writer_.ctx, *writer_.kv, ops_, writer_.table, {toks.back()},
                  static_cast<int32_t>(toks.size()) - 1, &logits));
    std::vector<float> scratch = logits;
    int32_t next = sampler.sample(scratch);
    if (next == special_.eos || next == special_.bos) {
      logits[static_cast<size_t>(special_.eos)] = -1e30f;
      logits[static_cast<size_t>(special_.bos)] = -1e30f;
      next = sampling::argmax(logits);
    }
    sampler.accept(next);
    toks.push_back(next);
  }
  return toks;
}

Result<int32_t> DatasetBuilder::generate(const std::vector<int32_t>& prompt, int32_t index) {
  sampling::SamplingParams sp;
  sp.temperature = spec_.temperature;
  sp.top_k = spec_.top_k;
  sp.seed = derive_seed(spec_.seed, index, 3);
  const auto n_vocab = static_cast<int32_t>(served_.model->hparams().n_vocab);
  KEEL_ASSIGN_OR_RETURN(sampling::Sampler sampler, sampling::Sampler::create(sp, n_vocab));
  sampler.set_prompt(prompt);
  std::vector<float> logits;
  KEEL_TRY(feed(*served_.ctx, *served_.kv, ops_, served_.table, prompt, 0, &logits));
  auto pos = static_cast<int32_t>(prompt.size());
  const auto n_ctx = static_cast<int32_t>(served_.model->n_ctx());
  int32_t generated = 0;
  while (generated < spec_.max_new_tokens) {
    const int32_t next = sampler.sample(logits);
    if (next == special_.eos || next == special_.bos) break;
    sampler.accept(next);
    ++generated;
    if (pos >= n_ctx || generated == spec_.max_new_tokens) break;
    KEEL_TRY(feed(*served_.ctx, *served_.kv, ops_, served_.table, {next}, pos++, &logits));
  }
  return generated;
}

Result<LengthSample> DatasetBuilder::sample(int32_t index) {
  LengthSample s;
  s.index = index;
  KEEL_ASSIGN_OR_RETURN(s.prompt, write_prompt(index));
  KEEL_ASSIGN_OR_RETURN(s.generated, generate(s.prompt, index));
  return s;
}

Result<std::vector<LengthSample>> DatasetBuilder::samples(
    const std::vector<int32_t>& indices, const std::function<void(size_t, size_t)>& progress) {
  std::vector<LengthSample> out;
  out.reserve(indices.size());
  for (int32_t i : indices) {
    KEEL_ASSIGN_OR_RETURN(LengthSample s, sample(i));
    out.push_back(std::move(s));
    if (progress) progress(out.size(), indices.size());
  }
  return out;
}

}  // namespace keel::predictor
