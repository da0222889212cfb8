// load_weights: tensor lookup, shape and type validation, Matrix views and f32 vector copies.
// Shapes are in GGML order (shape[0] is the row width), so a [rows][cols] matrix is {cols, rows}.
#include "model/weights.h"

#include <cmath>
#include <string>

#include "model/moe_weights.h"
#include "model/tensor_loader.h"

namespace keel::model {
namespace {

Result<LayerWeights> load_layer(TensorLoader& t, const HParams& hp, int64_t il) {
  const std::string p = "blk." + std::to_string(il) + ".";
  LayerWeights l;
  KEEL_ASSIGN_OR_RETURN(l.attn_norm, t.vector(p + "attn_norm.weight", hp.n_embd));
  KEEL_ASSIGN_OR_RETURN(l.wq, t.matrix(p + "attn_q.weight", hp.q_dim(), hp.n_embd));
  KEEL_ASSIGN_OR_RETURN(l.wk, t.matrix(p + "attn_k.weight", hp.kv_dim(), hp.n_embd));
  KEEL_ASSIGN_OR_RETURN(l.wv, t.matrix(p + "attn_v.weight", hp.kv_dim(), hp.n_embd));
  KEEL_ASSIGN_OR_RETURN(l.wo, t.matrix(p + "attn_output.weight", hp.n_embd, hp.q_dim()));
  if (hp.qkv_bias) {
    KEEL_ASSIGN_OR_RETURN(l.bq, t.vector(p + "attn_q.bias", hp.q_dim()));
    KEEL_ASSIGN_OR_RETURN(l.bk, t.vector(p + "attn_k.bias", hp.kv_dim()));
    KEEL_ASSIGN_OR_RETURN(l.bv, t.vector(p + "attn_v.bias", hp.kv_dim()));
  } else {  // llama-arch files may carry optional biases
    KEEL_ASSIGN_OR_RETURN(l.bq, t.optional_vector(p + "attn_q.bias", hp.q_dim()));
    KEEL_ASSIGN_OR_RETURN(l.bk, t.optional_vector(p + "attn_k.bias", hp.kv_dim()));
    KEEL_ASSIGN_OR_RETURN(l.bv, t.optional_vector(p + "attn_v.bias", hp.kv_dim()));
  }
  KEEL_ASSIGN_OR_RETURN(l.bo, t.optional_vector(p + "attn_output.bias", hp.n_embd));
  if (hp.qk_norm) {
    KEEL_ASSIGN_OR_RETURN(l.q_norm, t.vector(p + "attn_q_norm.weight", hp.head_dim));
    KEEL_ASSIGN_OR_RETURN(l.k_norm, t.vector(p + "attn_k_norm.weight", hp.head_dim));
  }
  KEEL_ASSIGN_OR_RETURN(l.ffn_norm, t.vector(p + "ffn_norm.weight", hp.n_embd));
  if (hp.is_moe()) {
    KEEL_ASSIGN_OR_RETURN(l.moe, load_moe_layer(t, hp, il));
    return l;
  }
  KEEL_ASSIGN_OR_RETURN(l.w_gate, t.matrix(p + "ffn_gate.weight", hp.n_ff, hp.n_embd));
  KEEL_ASSIGN_OR_RETURN(l.w_up, t.matrix(p + "ffn_up.weight", hp.n_ff, hp.n_embd));
  KEEL_ASSIGN_OR_RETURN(l.w_down, t.matrix(p + "ffn_down.weight", hp.n_embd, hp.n_ff));
  return l;
}

Status check_freq_factors(const gguf::GgufFile& file, const std::vector<float>& ff) {
  for (size_t i = 0; i < ff.size(); ++i) {
    if (!std::isfinite(ff[i]) || ff[i] <= 0.0f) {
      return Status::invalid_argument(file.path() + ": rope_freqs.weight[" + std::to_string(i) +
                                      "] = " + std::to_string(ff[i]) +
                                      " is not a positive finite number");
    }
  }
  return Status();
}

}  // namespace

Result<int64_t> read_vocab_size(const gguf::GgufFile& file, const HParams& hp) {
  const gguf::TensorInfo* info = file.find_tensor("token_embd.weight");
  if (!info) return Status::not_found(file.path() + ": tensor 'token_embd.weight' is missing");
  if (info->shape.size() < 2 || info->shape[0] != hp.n_embd || info->shape[1] < 1 ||
      (info->shape.size() > 2 && info->shape[2] != 1)) {
    return Status::invalid_argument(file.path() + ": tensor 'token_embd.weight' has shape " +
                                    shape_string(info->shape) + ", expected [" +
                                    std::to_string(hp.n_embd) + ", n_vocab]");
  }
  const std::string vocab_key = std::string(arch_name(hp.arch)) + ".vocab_size";
  if (file.find(vocab_key)) {
    KEEL_ASSIGN_OR_RETURN(int64_t declared, file.get_int(vocab_key));
    if (declared != info->shape[1]) {
      return Status::invalid_argument(
          file.path() + ": " + vocab_key + " (" + std::to_string(declared) + ") differs from the " +
          std::to_string(info->shape[1]) + " rows of token_embd.weight");
    }
  }
  return info->shape[1];
}

Result<Weights> load_weights(const gguf::GgufFile& file, const HParams& hp) {
  if (!file.has_data()) {
    return Status::invalid_argument(file.path() +
                                    ": opened without tensor data (DataMode::kNone); a model "
                                    "needs kRead or kMmap");
  }
  KEEL_CHECK(hp.n_vocab > 0);
  TensorLoader t(file);
  Weights w;
  KEEL_ASSIGN_OR_RETURN(w.token_embd, t.matrix("token_embd.weight", hp.n_vocab, hp.n_embd));
  KEEL_ASSIGN_OR_RETURN(w.output_norm, t.vector("output_norm.weight", hp.n_embd));
  w.tied_output = file.find_tensor("output.weight") == nullptr;
  if (w.tied_output) {
    w.output = w.token_embd;
  } else {
    KEEL_ASSIGN_OR_RETURN(w.output, t.matrix("output.weight", hp.n_vocab, hp.n_embd));
  }
  KEEL_ASSIGN_OR_RETURN(w.rope_freqs, t.optional_vector("rope_freqs.weight", hp.rope.n_rot / 2));
  KEEL_TRY(check_freq_factors(file, w.rope_freqs));
  w.layers.reserve(static_cast<size_t>(hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    KEEL_ASSIGN_OR_RETURN(LayerWeights layer, load_layer(t, hp, il));
    w.layers.push_back(std::move(layer));
  }
  t.warn_unused();
  return w;
}

}  // namespace keel::model
