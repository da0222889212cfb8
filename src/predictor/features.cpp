// FeatureExtractor (see features.h).
#include "predictor/features.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/thread_pool.h"
#include "model/batch.h"
#include "model/context.h"
#include "model/kv_storage.h"

namespace keel::predictor {
namespace {

constexpr int32_t kBlock = 16;

}  // namespace

FeatureExtractor::FeatureExtractor(const model::Model& model, kernels::Isa isa)
    : model_(model), isa_(isa), cpu_(detect_cpu_features()) {}

Result<std::vector<float>> FeatureExtractor::extract(std::span<const int32_t> prompt) const {
  if (prompt.empty()) return Status::invalid_argument("the prompt is empty");
  const model::HParams& hp = model_.hparams();
  const int64_t n_all = static_cast<int64_t>(prompt.size());
  const std::span<const int32_t> toks =
      prompt.subspan(static_cast<size_t>(n_all - std::min(n_all, model_.n_ctx())));
  const auto n = static_cast<int32_t>(toks.size());
  for (int32_t t : toks) {
    if (t < 0 || t >= hp.n_vocab) {
      return Status::invalid_argument("prompt token " + std::to_string(t) +
                                      " is outside the predictor model's vocabulary of " +
                                      std::to_string(hp.n_vocab));
    }
  }
  // Per-call scratch: the caller's thread is the pool's only thread.
  ThreadPool pool(1);
  kernels::Ops ops(isa_, &pool, cpu_);
  const int32_t blocks = (n + kBlock - 1) / kBlock;
  KEEL_ASSIGN_OR_RETURN(
      model::KvStorage kv,
      model::KvStorage::create(model::KvLayout::for_model(hp, kBlock, DType::kF32), blocks));
  model::Batch batch;
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  std::iota(table.begin(), table.end(), 0);
  const int32_t seq = batch.add_seq(std::move(table));
  for (int32_t i = 0; i < n; ++i) batch.add(toks[static_cast<size_t>(i)], i, seq, true);
  model::Context ctx(model_, n);
  std::vector<float> hidden;
  KEEL_TRY(ctx.forward_hidden(batch, kv, ops, &hidden));

  const auto d = static_cast<size_t>(hp.n_embd);
  std::vector<float> f(static_cast<size_t>(dim()), 0.0f);
  for (int32_t i = 0; i < n; ++i) {
    const float* row = hidden.data() + static_cast<size_t>(i) * d;
    for (size_t j = 0; j < d; ++j) f[j] += row[j];
  }
  for (size_t j = 0; j < d; ++j) f[j] /= static_cast<float>(n);
  std::copy_n(hidden.data() + static_cast<size_t>(n - 1) * d, d, f.begin() + static_cast<long>(d));
  f[2 * d] = std::log1p(static_cast<float>(n_all));
  return f;
}

}  // namespace keel::predictor
