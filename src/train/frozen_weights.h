// FrozenWeights: the base model's matrices as dense T for the trainer, dequantized from whatever
// type the GGUF holds (F32, F16, BF16, Q8_0, Q4_0, K-quants; row or row-group layout) through
// kernels::dequantize_matrix_row, each with its transpose (input gradients go through the
// dequantized weights: dx = dy · W). Layers are dequantized on first use; all of them stay cached
// when their dense size fits `cache_bytes`, else only the last one used (a backward pass then
// dequantizes each layer again — cheap beside the matmuls of a sequence).
//
// Invariants: the Model outlives the FrozenWeights; the references returned stay valid until the
// next call of layer(). Thread safety: one owner (the trainer's thread).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "model/lora_adapter.h"
#include "model/model.h"
#include "train/dense_ops.h"

namespace keel::train {

template <typename T>
struct DenseLayer {
  std::array<DenseMatrix<T>, model::kNumLoraTargets> w;   // by LoraTarget: [out][in]
  std::array<DenseMatrix<T>, model::kNumLoraTargets> wt;  // transposes: [in][out]
};

template <typename T>
class FrozenWeights {
 public:
  static constexpr size_t kDefaultCacheBytes = size_t{1} << 30;

  explicit FrozenWeights(const model::Model& model, size_t cache_bytes = kDefaultCacheBytes);

  const DenseLayer<T>& layer(int64_t il);
  [[nodiscard]] const DenseMatrix<T>& output() const { return output_; }      // [n_vocab][n_embd]
  [[nodiscard]] const DenseMatrix<T>& output_t() const { return output_t_; }  // [n_embd][n_vocab]
  // Row `token` of token_embd as T (n_embd values into `out`).
  void embed(int32_t token, T* out) const;

 private:
  const model::Model& model_;
  bool cache_all_ = false;
  std::vector<std::optional<DenseLayer<T>>> layers_;
  int64_t last_ = -1;  // the one cached layer when !cache_all_
  DenseMatrix<T> output_, output_t_;
};

}  // namespace keel::train
