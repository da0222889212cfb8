// What one model costs per token, from its tensors, and the speed the roofline bounds it to: the
// figures `keel bench --roofline` compares its measured speeds with (model_bench.h). tg is bound
// by the weight bytes streamed per token over the read bandwidth; pp by the FLOPs per token
// (layer matmuls + attention) over the peak of the instructions the matmuls of the model's main
// weight type use on this kernel table.
//
// Thread safety: plain functions of their arguments.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "kernels/roofline.h"
#include "model/hparams.h"
#include "model/model.h"

namespace keel::eval {

struct ModelCost {
  uint64_t size_bytes = 0;        // every tensor
  uint64_t n_params = 0;          // every tensor
  uint64_t decode_bytes = 0;      // streamed per decoded token: all but a gathered embedding table
                                  // (MoE: the experts' tensors × n_expert_used / n_expert)
  double matmul_flops = 0;        // per prefill token: 2 × weights of the layer matmuls (no head;
                                  // MoE: the active experts' share)
  DType main_type = DType::kF32;  // type holding most layer-matmul bytes
};

[[nodiscard]] ModelCost model_cost(const model::Model& m);

// Attention FLOPs per token of a pp<n> test (QKᵀ and PV over on average (n + 1) / 2 positions).
[[nodiscard]] double attention_flops(const model::HParams& hp, int32_t n);

struct SpeedBound {
  double tokens_per_second = 0;  // 0 = unknown (no peak for the weight type)
  std::string bound_by;          // "12.3 GB/s read", "456 G/s vpdpbusd"
};

// The bound of a pp<n_prompt> test (n_prompt > 0) or of a tg test (n_prompt 0).
[[nodiscard]] SpeedBound speed_bound(const ModelCost& cost, const model::HParams& hp,
                                     const kernels::Roofline& roof, int32_t n_prompt);

}  // namespace keel::eval
