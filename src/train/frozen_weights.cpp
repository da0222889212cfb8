// FrozenWeights: on-demand dequantization of the base model's layers (frozen_weights.h).
#include "train/frozen_weights.h"

#include "core/index_cast.h"
#include "kernels/weight_layout.h"

namespace keel::train {
namespace {

const kernels::Matrix& target_matrix(const model::LayerWeights& w, size_t t) {
  const kernels::Matrix* m[] = {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down};
  return *m[t];
}

}  // namespace

template <typename T>
FrozenWeights<T>::FrozenWeights(const model::Model& model, size_t cache_bytes) : model_(model) {
  const model::HParams& hp = model.hparams();
  size_t dense = 0;
  for (const model::LayerWeights& w : model.weights().layers) {
    for (size_t t = 0; t < model::kNumLoraTargets; ++t) {
      const kernels::Matrix& m = target_matrix(w, t);
      dense += 2 * sz(m.rows * m.cols) * sizeof(T);
    }
  }
  cache_all_ = dense <= cache_bytes;
  layers_.resize(sz(hp.n_layer));
  output_ = dequantize<T>(model.weights().output);
  output_t_ = transpose(output_);
}

template <typename T>
const DenseLayer<T>& FrozenWeights<T>::layer(int64_t il) {
  std::optional<DenseLayer<T>>& slot = layers_[sz(il)];
  if (slot) return *slot;
  if (!cache_all_ && last_ >= 0) layers_[sz(last_)].reset();
  const model::LayerWeights& w = model_.weights().layers[sz(il)];
  DenseLayer<T>& d = slot.emplace();
  for (size_t t = 0; t < model::kNumLoraTargets; ++t) {
    d.w[t] = dequantize<T>(target_matrix(w, t));
    d.wt[t] = transpose(d.w[t]);
  }
  last_ = il;
  return d;
}

template <typename T>
void FrozenWeights<T>::embed(int32_t token, T* out) const {
  const kernels::Matrix& e = model_.weights().token_embd;
  std::vector<float> row(sz(e.cols));
  kernels::dequantize_matrix_row(e, token, row.data());
  for (int64_t i = 0; i < e.cols; ++i) out[i] = static_cast<T>(row[sz(i)]);
}

template class FrozenWeights<float>;
template class FrozenWeights<double>;

}  // namespace keel::train
