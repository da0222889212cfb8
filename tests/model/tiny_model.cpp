// Tiny random GGUF models for model tests, and a double-precision reference forward pass.
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <random>

#include "core/fp16.h"
#include "gguf/writer.h"
#include "kernels/kernels.h"
#include "support/test_support.h"

namespace keel::model::testing {
namespace {

struct TensorDef {
  std::string name;
  std::vector<int64_t> shape;  // GGML order
  double stddev;
  double mean;
  bool is_matrix;
  bool zero = false;
};

uint32_t name_seed(const std::string& name, uint32_t seed) {
  uint32_t h = 2166136261u;
  for (unsigned char c : name) h = (h ^ c) * 16777619u;
  return h ^ (seed * 0x9e3779b9u);
}

void moe_defs(const TinySpec& s, const std::string& p, std::vector<TensorDef>& d) {
  const int64_t ne = s.n_expert, ff = s.n_ff_exp;
  const double proj = 1.0 / std::sqrt(static_cast<double>(s.n_embd));
  d.push_back({p + "ffn_gate_inp.weight", {s.n_embd, ne}, 2.0 * proj, 0.0, true});
  d.push_back({p + "ffn_gate_exps.weight", {s.n_embd, ff, ne}, proj, 0.0, true});
  d.push_back({p + "ffn_up_exps.weight", {s.n_embd, ff, ne}, proj, 0.0, true});
  d.push_back({p + "ffn_down_exps.weight",
               {ff, s.n_embd, ne},
               1.0 / std::sqrt(static_cast<double>(ff)),
               0.0,
               true});
  if (s.n_ff_shexp > 0) {
    const int64_t sf = s.n_ff_shexp;
    d.push_back({p + "ffn_gate_inp_shexp.weight", {s.n_embd}, proj, 0.0, false});
    d.push_back({p + "ffn_gate_shexp.weight", {s.n_embd, sf}, proj, 0.0, true});
    d.push_back({p + "ffn_up_shexp.weight", {s.n_embd, sf}, proj, 0.0, true});
    d.push_back({p + "ffn_down_shexp.weight",
                 {sf, s.n_embd},
                 1.0 / std::sqrt(static_cast<double>(sf)),
                 0.0,
                 true});
  }
}

std::vector<TensorDef> tensor_defs(const TinySpec& s) {
  const int64_t q_dim = s.n_head * s.head_dim, kv_dim = s.n_head_kv * s.head_dim;
  const double proj = 1.0 / std::sqrt(static_cast<double>(s.n_embd));
  std::vector<TensorDef> d;
  d.push_back({"token_embd.weight", {s.n_embd, s.n_vocab}, 1.0, 0.0, true});
  d.push_back({"output_norm.weight", {s.n_embd}, 0.1, 1.0, false});
  if (!s.tied_output) d.push_back({"output.weight", {s.n_embd, s.n_vocab}, proj, 0.0, true});
  if (!s.rope_freqs.empty()) {
    d.push_back({"rope_freqs.weight", {static_cast<int64_t>(s.rope_freqs.size())}, 0, 0, false});
  }
  for (int64_t il = 0; il < s.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    d.push_back({p + "attn_norm.weight", {s.n_embd}, 0.1, 1.0, false});
    d.push_back({p + "attn_q.weight", {s.n_embd, q_dim}, proj, 0.0, true});
    d.push_back({p + "attn_k.weight", {s.n_embd, kv_dim}, proj, 0.0, true});
    d.push_back({p + "attn_v.weight", {s.n_embd, kv_dim}, proj, 0.0, true});
    if (s.qkv_bias) {
      d.push_back({p + "attn_q.bias", {q_dim}, 0.3, 0.0, false, s.zero_bias});
      d.push_back({p + "attn_k.bias", {kv_dim}, 0.3, 0.0, false, s.zero_bias});
      d.push_back({p + "attn_v.bias", {kv_dim}, 0.3, 0.0, false, s.zero_bias});
    }
    if (s.qk_norm) {
      d.push_back({p + "attn_q_norm.weight", {s.head_dim}, 0.1, 1.0, false});
      d.push_back({p + "attn_k_norm.weight", {s.head_dim}, 0.1, 1.0, false});
    }
    d.push_back({p + "attn_output.weight",
                 {q_dim, s.n_embd},
                 1.0 / std::sqrt(static_cast<double>(q_dim)),
                 0.0,
                 true});
    d.push_back({p + "ffn_norm.weight", {s.n_embd}, 0.1, 1.0, false});
    if (s.n_expert > 0) {
      moe_defs(s, p, d);
      continue;
    }
    d.push_back({p + "ffn_gate.weight", {s.n_embd, s.n_ff}, proj, 0.0, true});
    d.push_back({p + "ffn_up.weight", {s.n_embd, s.n_ff}, proj, 0.0, true});
    d.push_back({p + "ffn_down.weight",
                 {s.n_ff, s.n_embd},
                 1.0 / std::sqrt(static_cast<double>(s.n_ff)),
                 0.0,
                 true});
  }
  return d;
}

// Rounds values to `dtype` (F32/F16/BF16) or quantizes them (Q8_0/Q4_0/Q4_K) and returns the
// stored bytes; random bytes with small finite scales otherwise (Q5_K/Q6_K).
std::vector<std::byte> encode(DType dtype, std::vector<float>& values, uint32_t seed) {
  std::vector<std::byte> out;
  if (dtype == DType::kF32) {
    out.resize(values.size() * 4);
    std::memcpy(out.data(), values.data(), out.size());
  } else if (dtype == DType::kF16 || dtype == DType::kBF16) {
    out.resize(values.size() * 2);
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t h = dtype == DType::kF16 ? fp32_to_fp16(values[i]) : fp32_to_bf16(values[i]);
      values[i] = dtype == DType::kF16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  } else {
    const auto& info = dtype_info(dtype);
    const auto n = static_cast<int64_t>(values.size());
    out.resize(static_cast<size_t>((n + info.block_size - 1) / info.block_size * info.block_bytes));
    if (kernels::quantize_supports(dtype) && n % info.block_size == 0) {
      kernels::quantize_row(dtype, values.data(), out.data(), n);  // blocks never straddle rows
    } else {
      std::mt19937 rng(seed);
      for (auto& b : out) b = static_cast<std::byte>(rng() & 0xff);
      if (dtype == DType::kQ5_K || dtype == DType::kQ6_K) {  // small finite super-block scales
        for (size_t blk = 0; blk + info.block_bytes <= out.size(); blk += info.block_bytes) {
          const uint16_t d = fp32_to_fp16(0.002f);
          std::memcpy(out.data() + blk + (dtype == DType::kQ6_K ? 208 : 0), &d, 2);
          if (dtype == DType::kQ5_K) std::memcpy(out.data() + blk + 2, &d, 2);
        }
      }
    }
    values.clear();
  }
  return out;
}

void write_metadata(const TinySpec& s, gguf::GgufWriter& w) {
  const std::string& a = s.arch;
  std::vector<std::pair<std::string, gguf::Value>> kv = {
      {"general.architecture", a},
      {a + ".context_length", static_cast<uint32_t>(s.n_ctx)},
      {a + ".embedding_length", static_cast<uint32_t>(s.n_embd)},
      {a + ".block_count", static_cast<uint32_t>(s.n_layer)},
      {a + ".feed_forward_length", static_cast<uint32_t>(s.n_ff)},
      {a + ".attention.head_count", static_cast<uint32_t>(s.n_head)},
      {a + ".attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv)},
      {a + ".attention.layer_norm_rms_epsilon", s.rms_eps},
      {a + ".rope.freq_base", s.freq_base},
  };
  if (s.head_dim * s.n_head != s.n_embd) {
    kv.emplace_back(a + ".attention.key_length", static_cast<uint32_t>(s.head_dim));
    kv.emplace_back(a + ".attention.value_length", static_cast<uint32_t>(s.head_dim));
  }
  if (s.n_rot != s.head_dim) kv.emplace_back(a + ".rope.dimension_count", uint32_t(s.n_rot));
  if (s.n_expert > 0) {
    kv.emplace_back(a + ".expert_count", static_cast<uint32_t>(s.n_expert));
    kv.emplace_back(a + ".expert_used_count", static_cast<uint32_t>(s.n_expert_used));
    if (a != "llama") {
      kv.emplace_back(a + ".expert_feed_forward_length", static_cast<uint32_t>(s.n_ff_exp));
    }
    if (s.n_ff_shexp > 0) {
      kv.emplace_back(a + ".expert_shared_feed_forward_length",
                      static_cast<uint32_t>(s.n_ff_shexp));
    }
  }
  if (!s.rope_scaling_type.empty()) kv.emplace_back(a + ".rope.scaling.type", s.rope_scaling_type);
  if (s.rope_scaling_factor != 0)
    kv.emplace_back(a + ".rope.scaling.factor", s.rope_scaling_factor);
  if (s.rope_orig_ctx != 0) {
    kv.emplace_back(a + ".rope.scaling.original_context_length",
                    static_cast<uint32_t>(s.rope_orig_ctx));
  }
  if (s.rope_attn_factor != 0) kv.emplace_back(a + ".rope.scaling.attn_factor", s.rope_attn_factor);
  for (auto& [key, value] : kv) {
    if (!s.skip_keys.contains(key)) w.set(key, value);
  }
  for (const auto& [key, value] : s.extra_keys) w.set(key, value);
}

}  // namespace

TinyModel write_tiny_model(TinySpec spec) {
  if (spec.arch == "qwen2" || spec.arch == "qwen2moe") spec.qkv_bias = true;
  if (spec.arch == "qwen3" || spec.arch == "qwen3moe") spec.qk_norm = true;
  if (spec.arch == "llama" && spec.n_expert > 0) spec.n_ff_exp = spec.n_ff;
  if (spec.head_dim == 0) spec.head_dim = spec.n_embd / spec.n_head;
  if (spec.n_rot == 0) spec.n_rot = spec.head_dim;
  TinyModel m;
  m.spec = spec;
  gguf::GgufWriter w;
  write_metadata(spec, w);
  for (TensorDef d : tensor_defs(spec)) {
    if (spec.skip_tensors.contains(d.name)) continue;
    if (auto it = spec.shape_override.find(d.name); it != spec.shape_override.end()) {
      d.shape = it->second;
    }
    int64_t n = 1;
    for (int64_t e : d.shape) n *= e;
    std::vector<float> values(static_cast<size_t>(n));
    std::mt19937 rng(name_seed(d.name, spec.seed));
    std::normal_distribution<double> normal(d.mean, d.stddev);
    for (auto& v : values) v = d.zero ? 0.0f : static_cast<float>(normal(rng));
    if (d.name == "rope_freqs.weight") values = spec.rope_freqs;
    if (auto it = spec.value_override.find(d.name); it != spec.value_override.end()) {
      values = it->second;
    }
    if (spec.transform) spec.transform(d.name, values);
    DType dtype = d.is_matrix ? spec.matrix_dtype : spec.norm_dtype;
    if (d.name == "rope_freqs.weight") dtype = DType::kF32;
    if (auto it = spec.dtype_override.find(d.name); it != spec.dtype_override.end()) {
      dtype = it->second;
    }
    std::vector<std::byte> bytes = encode(dtype, values, name_seed(d.name, spec.seed));
    Status st = w.add_tensor(d.name, dtype, d.shape, bytes);
    if (!st.ok()) ADD_FAILURE() << "add_tensor " << d.name << ": " << st.to_string();
    if (!values.empty()) m.tensors[d.name] = std::move(values);
  }
  m.path = keel::testing::make_temp_dir("tiny-model") + "/" + spec.arch + ".gguf";
  Status st = w.write(m.path);
  if (!st.ok()) ADD_FAILURE() << "write " << m.path << ": " << st.to_string();
  return m;
}

YarnReference yarn_reference(int64_t n_rot, int64_t orig_ctx, double base, double factor,
                             double attn_factor) {
  const auto pair_turning = [&](double beta) {
    return static_cast<double>(n_rot) *
           std::log(static_cast<double>(orig_ctx) / (2.0 * std::numbers::pi * beta)) /
           (2.0 * std::log(base));
  };
  YarnReference y;
  y.ext_factor = 1.0;
  y.low = std::max(0.0, std::floor(pair_turning(32.0)));
  y.high = std::min(static_cast<double>(n_rot - 1), std::ceil(pair_turning(1.0)));
  y.mscale = (factor > 1.0 ? 1.0 + 0.1 * std::log(factor) : 1.0) * attn_factor;
  return y;
}

void reference_rope(std::vector<double>& x, int64_t pos, int64_t n_rot, double base,
                    double freq_scale, bool neox, const std::vector<float>& factors,
                    const YarnReference& yarn) {
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const double ff = factors.empty() ? 1.0 : factors[static_cast<size_t>(i)];
    const double extrap =
        static_cast<double>(pos) * std::pow(base, -2.0 * static_cast<double>(i) / n_rot) / ff;
    const double ramp = 1.0 - std::clamp((static_cast<double>(i) - yarn.low) /
                                             std::max(0.001, yarn.high - yarn.low),
                                         0.0, 1.0);
    const double mix = yarn.ext_factor * ramp;
    const double angle = freq_scale * extrap * (1.0 - mix) + extrap * mix;
    const auto a = static_cast<size_t>(neox ? i : 2 * i);
    const auto b = static_cast<size_t>(neox ? i + n_rot / 2 : 2 * i + 1);
    const double x0 = x[a], x1 = x[b];
    x[a] = yarn.mscale * (x0 * std::cos(angle) - x1 * std::sin(angle));
    x[b] = yarn.mscale * (x0 * std::sin(angle) + x1 * std::cos(angle));
  }
}

}  // namespace keel::model::testing
