// Weights: views of a Llama-family model's tensors. Matrices are kernels::Matrix views into the
// bytes of the GgufFile (which must outlive the Weights; the Model owns both). Norm weights,
// biases and RoPE frequency factors are small and are copied into owned f32 vectors (F16/BF16
// converted at load).
//
// Invariants after load_weights(): every required tensor exists with exactly the shape the
// hyper-parameters imply (a layer has the dense FFN or, when hp.is_moe(), the MoE tensors), every
// matrix has a type kernels::matmul_supports(), every vector is f32. Thread safety: immutable after
// load; shareable across threads.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "gguf/reader.h"
#include "kernels/kernels.h"
#include "model/hparams.h"
#include "model/moe_weights.h"

namespace keel::model {

struct LayerWeights {
  std::vector<float> attn_norm;  // [n_embd]
  kernels::Matrix wq;            // [q_dim rows][n_embd cols]
  kernels::Matrix wk;            // [kv_dim][n_embd]
  kernels::Matrix wv;            // [kv_dim][n_embd]
  kernels::Matrix wo;            // [n_embd][q_dim]
  std::vector<float> bq;         // [q_dim]; empty when the model has no attn_q.bias
  std::vector<float> bk;         // [kv_dim]; empty when absent
  std::vector<float> bv;         // [kv_dim]; empty when absent
  std::vector<float> bo;         // [n_embd]; empty when absent
  std::vector<float> q_norm;     // [head_dim]; qwen3 only, else empty
  std::vector<float> k_norm;     // [head_dim]; qwen3 only, else empty
  std::vector<float> ffn_norm;   // [n_embd]
  kernels::Matrix w_gate;        // [n_ff][n_embd]; dense models only (rows 0 in an MoE layer)
  kernels::Matrix w_up;          // [n_ff][n_embd]; dense only
  kernels::Matrix w_down;        // [n_embd][n_ff]; dense only
  MoeWeights moe;                // mixture-of-experts models only (moe_weights.h), else empty
};

struct Weights {
  kernels::Matrix token_embd;        // [n_vocab][n_embd]; rows are dequantized for embedding
  std::vector<float> output_norm;    // [n_embd]
  kernels::Matrix output;            // [n_vocab][n_embd]; token_embd when output.weight is absent
  bool tied_output = false;          // true when `output` is token_embd
  std::vector<float> rope_freqs;     // [n_rot / 2] llama3 frequency factors; empty when absent
  std::vector<LayerWeights> layers;  // [n_layer]
};

// The vocabulary size: the row count of token_embd.weight (whose row width must be n_embd). An
// `<arch>.vocab_size` key, when present, must agree.
Result<int64_t> read_vocab_size(const gguf::GgufFile& file, const HParams& hp);

// Builds views of every tensor and validates presence, shape and type. `hp.n_vocab` must be set.
// Errors name the file and tensor: NotFound (missing), InvalidArgument (wrong shape),
// Unsupported (a type keel cannot multiply, e.g. "blk.0.attn_q.weight has type IQ2_XS, which
// keel does not support").
Result<Weights> load_weights(const gguf::GgufFile& file, const HParams& hp);

}  // namespace keel::model
