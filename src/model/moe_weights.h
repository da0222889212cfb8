// MoeWeights: one layer's mixture-of-experts FFN tensors (see MoeParams in hparams.h), as views
// into the GgufFile. The experts of a layer may come in any of the layouts llama.cpp writes or
// reads, all viewed as one Matrix per expert:
//   blk.N.ffn_{gate,up,down}_exps.weight    3-D, {cols, rows, n_expert} (the usual layout)
//   blk.N.ffn_gate_up_exps.weight           3-D, {n_embd, 2·n_ff_exp, n_expert}: per expert the
//                                           gate rows first, then the up rows (+ ffn_down_exps)
//   blk.N.ffn_{gate,up,down}.E.weight       one 2-D tensor per expert E (older Mixtral files)
// plus the router blk.N.ffn_gate_inp.weight [n_expert][n_embd] and, for qwen2moe, the shared
// expert blk.N.ffn_{gate,up,down}_shexp.weight and its gate blk.N.ffn_gate_inp_shexp.weight
// ([n_embd], a vector).
//
// Invariants after load_moe_layer(): gate, up and down hold n_expert matrices of the shapes the
// hyper-parameters imply, every matrix of a type kernels::matmul_supports(). Immutable after load.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "kernels/kernels.h"
#include "model/hparams.h"

namespace keel::model {

class TensorLoader;

struct MoeWeights {
  kernels::Matrix router;             // [n_expert][n_embd]  ffn_gate_inp
  std::vector<kernels::Matrix> gate;  // [n_expert] of [n_ff_exp][n_embd]
  std::vector<kernels::Matrix> up;    // [n_expert] of [n_ff_exp][n_embd]
  std::vector<kernels::Matrix> down;  // [n_expert] of [n_embd][n_ff_exp]
  kernels::Matrix shared_gate;        // [n_ff_shexp][n_embd]; rows == 0 without a shared expert
  kernels::Matrix shared_up;          // [n_ff_shexp][n_embd]
  kernels::Matrix shared_down;        // [n_embd][n_ff_shexp]
  std::vector<float> shared_router;   // [n_embd]  ffn_gate_inp_shexp

  [[nodiscard]] bool empty() const { return gate.empty(); }
  [[nodiscard]] bool has_shared() const { return shared_gate.rows > 0; }
};

// Loads layer il's MoE tensors in whichever layout the file has (a file mixing layouts within
// one layer is an error naming the tensors). Errors as TensorLoader's.
Result<MoeWeights> load_moe_layer(TensorLoader& t, const HParams& hp, int64_t il);

}  // namespace keel::model
