// Test helper: writes tiny random llama / qwen2 / qwen3 GGUF models with GgufWriter, with knobs
// to break them (missing or mistyped keys, missing tensors, wrong shapes, unsupported types), and
// a straightforward double-precision reference forward pass over the same values, written from
// the formulas and independent of keel's kernels.
//
// Weights are deterministic functions of (seed, tensor name), so two specs that differ only in
// architecture or extra tensors share every common tensor's values.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "gguf/value.h"

namespace keel::model::testing {

struct TinySpec {
  std::string arch = "llama";  // general.architecture
  int64_t n_embd = 32;
  int64_t n_layer = 2;
  int64_t n_head = 4;
  int64_t n_head_kv = 2;
  int64_t head_dim = 0;  // 0: n_embd / n_head (no key_length key written)
  int64_t n_ff = 48;
  int64_t n_vocab = 40;
  int64_t n_ctx = 64;
  int64_t n_rot = 0;  // 0: head_dim (no rope.dimension_count key written)
  float rms_eps = 1e-5f;
  float freq_base = 10000.0f;
  std::string rope_scaling_type;  // written when non-empty
  float rope_scaling_factor = 0;  // written when non-zero
  int64_t rope_orig_ctx = 0;      // rope.scaling.original_context_length, written when non-zero
  float rope_attn_factor = 0;     // rope.scaling.attn_factor, written when non-zero
  std::vector<float> rope_freqs;  // rope_freqs.weight when non-empty
  bool tied_output = false;       // no output.weight
  bool qkv_bias = false;          // attn_{q,k,v}.bias (set automatically for qwen2)
  bool zero_bias = false;         // biases are all zero
  bool qk_norm = false;           // attn_{q,k}_norm.weight (set automatically for qwen3)
  // Mixture of experts (n_expert > 0; arch llama, qwen2moe or qwen3moe): 3-D expert tensors
  // blk.N.ffn_{gate,up,down}_exps (values [expert][rows][cols]), the router ffn_gate_inp, and for
  // n_ff_shexp > 0 the shared expert (qwen2moe). Keys expert_count, expert_used_count and
  // (qwen*moe) expert_feed_forward_length / expert_shared_feed_forward_length are written.
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;              // qwen*moe expert width (llama: n_ff)
  int64_t n_ff_shexp = 0;            // qwen2moe shared expert width
  DType matrix_dtype = DType::kF32;  // F32, F16 or BF16 hold real values; others random bytes
  DType norm_dtype = DType::kF32;    // F32, F16 or BF16
  uint32_t seed = 1;

  // Breakage and overrides, applied by name.
  std::set<std::string> skip_tensors;
  std::set<std::string> skip_keys;
  std::map<std::string, std::vector<int64_t>> shape_override;  // GGML order
  std::map<std::string, DType> dtype_override;
  std::map<std::string, std::vector<float>> value_override;     // replaces generated values
  std::vector<std::pair<std::string, gguf::Value>> extra_keys;  // set last (override)
  // Transforms a tensor's generated values (after value_override): fn(name, values).
  std::function<void(const std::string&, std::vector<float>&)> transform;
};

struct TinyModel {
  TinySpec spec;  // as written (qwen2/qwen3 flags resolved, head_dim resolved)
  std::string path;
  // Values as stored (after f16/bf16 rounding), row-major [rows][cols]; only for F32/F16/BF16.
  std::map<std::string, std::vector<float>> tensors;
};

// Writes the model into a fresh temporary directory. Fails the test (ADD_FAILURE) on error.
TinyModel write_tiny_model(TinySpec spec);

// Logits [n_tokens][n_vocab] for one sequence at positions 0..n-1, computed in double from
// model.tensors by the textbook formulas.
std::vector<std::vector<float>> reference_logits(const TinyModel& model,
                                                 const std::vector<int32_t>& tokens);

// YaRN's part of RoPE (Peng et al. 2023, as llama.cpp applies it), in double: pairs up to `low`
// keep their unscaled angle, pairs from `high` on take the interpolated one, a linear ramp between
// (weighted by ext_factor), and every rotated value is multiplied by mscale. ext_factor 0 and
// mscale 1: plain or linear-scaled RoPE.
struct YarnReference {
  double ext_factor = 0.0;
  double low = 0.0, high = 0.0;
  double mscale = 1.0;
};

// YaRN from a file's keys, computed here from the formulas: the pair that turns β times over
// orig_ctx positions is d(β) = n_rot·ln(orig_ctx / (2π·β)) / (2·ln base); low = floor(d(32)),
// high = ceil(d(1)) (clamped to [0, n_rot − 1]); mscale = (1 + 0.1·ln factor) · attn_factor.
YarnReference yarn_reference(int64_t n_rot, int64_t orig_ctx, double base, double factor,
                             double attn_factor);

// The RoPE rotation of `x` (one head, head_dim values) at `pos`, in double, from the formula:
// pair i (adjacent (2i, 2i+1), or (i, i + n_rot/2) for NeoX) turns by
// θx = pos * base^(-2i/n_rot) / factor_i interpolated to freq_scale·θx, or for YaRN
// θ = freq_scale·θx·(1 − m) + θx·m with m = ext_factor·(1 − clamp((i − low)/(high − low), 0, 1)),
// and the pair is scaled by yarn.mscale.
void reference_rope(std::vector<double>& x, int64_t pos, int64_t n_rot, double base,
                    double freq_scale, bool neox, const std::vector<float>& factors,
                    const YarnReference& yarn = {});

}  // namespace keel::model::testing
