// Hyper-parameters of a Llama-family model, read from GGUF metadata (`<arch>.*` keys) and checked
// for consistency. Supported architectures: llama (Llama 2/3, TinyLlama, Mistral, llama2.c
// stories; RoPE on adjacent pairs; with `llama.expert_count` > 0 a Mixtral-style mixture of
// experts), qwen2 (QKV bias; NeoX RoPE), qwen3 (per-head QK RMSNorm; NeoX RoPE; head_dim may
// differ from n_embd / n_head), and the mixture-of-experts qwen2moe (qwen2 attention; a shared
// expert) and qwen3moe (qwen3 attention). Anything else is a clear Unsupported error, which for
// the MoE architectures keel does not run (deepseek2, gpt-oss, ...) says so.
//
// Invariants of a parsed HParams: all counts > 0, n_head % n_head_kv == 0, rope.n_rot even and
// ≤ head_dim. The vocabulary size comes from token_embd.weight (see weights.h), not metadata.
// Thread safety: plain data.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"
#include "gguf/reader.h"
#include "kernels/kernels.h"

namespace keel::model {

enum class Arch { kLlama, kQwen2, kQwen3, kQwen2Moe, kQwen3Moe };

// "llama", "qwen2", "qwen3", "qwen2moe", "qwen3moe" — the `general.architecture` value and the
// metadata key prefix.
std::string_view arch_name(Arch arch);

// The mixture-of-experts FFN of every layer, as llama.cpp defines it per architecture: router
// logits = ffn_gate_inp · x, softmax over all experts, the n_expert_used largest probabilities
// chosen, their weights renormalised to sum 1 when norm_weights (llama/Mixtral, qwen3moe; not
// qwen2moe), each chosen expert a SwiGLU FFN of width n_ff_exp, the outputs summed with those
// weights; qwen2moe adds a shared SwiGLU expert of width n_ff_shexp scaled by
// sigmoid(ffn_gate_inp_shexp · x). n_expert = 0: a dense model (every other field 0 / false).
struct MoeParams {
  int64_t n_expert = 0;       // <arch>.expert_count
  int64_t n_expert_used = 0;  // <arch>.expert_used_count, in [1, n_expert]
  int64_t n_ff_exp = 0;       // llama: feed_forward_length; qwen*moe: expert_feed_forward_length
                              // (default feed_forward_length / n_expert_used, as llama.cpp)
  int64_t n_ff_shexp = 0;     // qwen2moe: expert_shared_feed_forward_length (default
                              // feed_forward_length); 0 = no shared expert
  bool norm_weights = false;  // renormalise the chosen experts' weights (fixed per architecture)
};

struct HParams {
  Arch arch = Arch::kLlama;
  int64_t n_vocab = 0;      // rows of token_embd.weight
  int64_t n_embd = 0;       // <arch>.embedding_length
  int64_t n_layer = 0;      // <arch>.block_count
  int64_t n_head = 0;       // <arch>.attention.head_count
  int64_t n_head_kv = 0;    // <arch>.attention.head_count_kv (default n_head)
  int64_t head_dim = 0;     // <arch>.attention.key_length (default n_embd / n_head)
  int64_t n_ff = 0;         // <arch>.feed_forward_length (optional for qwen*moe: 0 when absent)
  int64_t n_ctx_train = 0;  // <arch>.context_length
  float rms_eps = 0.0f;     // <arch>.attention.layer_norm_rms_epsilon
  // n_rot (<arch>.rope.dimension_count, default head_dim), freq_base (<arch>.rope.freq_base,
  // default 10000), freq_scale (1 / <arch>.rope.scaling.factor for linear and YaRN scaling),
  // neox (by architecture), YaRN's ext_factor, ramp and mscale (<arch>.rope.scaling.type =
  // "yarn"; see parse_rope_scaling in hparams.cpp). freq_factors stays null here; the Model
  // points it at rope_freqs.weight.
  kernels::RopeParams rope;
  int64_t n_ctx_orig_yarn = 0;  // <arch>.rope.scaling.original_context_length (default n_ctx_train)
  bool qkv_bias = false;        // attn_{q,k,v}.bias required (qwen2, qwen2moe)
  bool qk_norm = false;         // attn_{q,k}_norm.weight required (qwen3, qwen3moe)
  MoeParams moe;                // n_expert == 0 for a dense model

  [[nodiscard]] bool is_moe() const { return moe.n_expert > 0; }

  [[nodiscard]] int64_t q_dim() const { return n_head * head_dim; }      // query row width
  [[nodiscard]] int64_t kv_dim() const { return n_head_kv * head_dim; }  // key/value row width
};

// Reads and validates the hyper-parameters (everything except n_vocab). Errors name the file and
// the key at fault: NotFound for a missing required key, InvalidArgument for a mistyped or
// inconsistent value, Unsupported for an unknown architecture or RoPE scaling type.
Result<HParams> parse_hparams(const gguf::GgufFile& file);

}  // namespace keel::model
