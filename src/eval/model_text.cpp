// model_written_tokens (see model_text.h).
#include "eval/model_text.h"

#include "sampling/sampler.h"
#include "sampling/softmax_math.h"

namespace keel::eval {

int32_t argmax_excluding(std::vector<float> logits, TextSpec special) {
  logits[static_cast<size_t>(special.eos)] = -1e30f;
  logits[static_cast<size_t>(special.bos)] = -1e30f;
  return sampling::argmax(logits);
}

Result<std::vector<int32_t>> model_written_tokens(model::Context& ctx, model::KvStorage& kv,
                                                  kernels::Ops& ops, std::span<const int32_t> table,
                                                  TextSpec special, uint64_t seed, int32_t n) {
  sampling::SamplingParams sp;
  sp.temperature = 0.8f;
  sp.top_k = 40;
  sp.seed = seed;
  KEEL_ASSIGN_OR_RETURN(sampling::Sampler sampler, sampling::Sampler::create(sp, special.n_vocab));
  std::vector<int32_t> toks = {special.bos};
  std::vector<float> logits;
  while (static_cast<int32_t>(toks.size()) < n) {
    model::Batch b;
    const int32_t seq = b.add_seq(std::vector<int32_t>(table.begin(), table.end()));
    b.add(toks.back(), static_cast<int32_t>(toks.size()) - 1, seq, true);
    KEEL_TRY(ctx.forward(b, kv, ops, &logits));
    int32_t next = sampler.sample(logits);
    if (next == special.eos || next == special.bos) next = argmax_excluding(logits, special);
    sampler.accept(next);
    toks.push_back(next);
  }
  return toks;
}

}  // namespace keel::eval
