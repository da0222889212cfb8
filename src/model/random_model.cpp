// write_random_model: shape table, seeded weight streams, vocab (generated or copied), GGUF output.
#include "model/random_model.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <numbers>
#include <utility>

#include "core/fp16.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "kernels/kernels.h"
#include "model/byte_vocab.h"
#include "model/normal_stream.h"

namespace keel::model {
namespace {

ModelShape moe(ModelShape s, const char* arch, int64_t head_dim, int64_t n_expert, int64_t used,
               int64_t n_ff_exp, int64_t n_ff_shexp) {
  s.arch = arch;
  s.head_dim = head_dim;
  s.n_expert = n_expert;
  s.n_expert_used = used;
  s.n_ff_exp = n_ff_exp;
  s.n_ff_shexp = n_ff_shexp;
  return s;
}

// A dense shape written as `arch` (a dense architecture) with its head size.
ModelShape dense_as(ModelShape s, const char* arch, int64_t head_dim) {
  s.arch = arch;
  s.head_dim = head_dim;
  return s;
}

bool has_qkv_bias(const std::string& arch) { return arch == "qwen2" || arch == "qwen2moe"; }
bool has_qk_norm(const std::string& arch) { return arch == "qwen3" || arch == "qwen3moe"; }

const std::vector<ModelShape>& shapes() {
  // name, embd, layers, heads, kv heads, ffn, vocab, ctx, rope base, eps, tied, llama3 rope
  static const std::vector<ModelShape> kShapes = {
      {"tiny", 256, 4, 4, 2, 768, 0, 2048, 10000.0f, 1e-5f, false, false},
      // The embedding fixture's test shape (embedded_model.h): at stories260K's head size 8 its
      // K/V width of 64 is 8 KV heads for 32 query heads, groups of 4 as TinyLlama's are of 8.
      {"tiny-gqa", 256, 8, 4, 1, 512, 0, 2048, 10000.0f, 1e-5f, false, false},
      {"tinyllama-1.1b", 2048, 22, 32, 4, 5632, 32000, 2048, 10000.0f, 1e-5f, false, false},
      {"llama-3.2-1b", 2048, 16, 32, 8, 8192, 128256, 131072, 500000.0f, 1e-5f, true, true},
      {"qwen2.5-0.5b", 896, 24, 14, 2, 4864, 151936, 32768, 1000000.0f, 1e-6f, true, false},
      dense_as({"qwen3-0.6b", 1024, 28, 16, 8, 3072, 151936, 40960, 1e6f, 1e-6f, true, false},
               "qwen3", 128),
      // Mixtures of experts: arch, head_dim, experts, used, expert FFN, shared expert FFN.
      moe({"qwen3-30b-a3b", 2048, 48, 32, 4, 6144, 151936, 40960, 1e6f, 1e-6f, false, false},
          "qwen3moe", 128, 128, 8, 768, 0),
      moe({"mixtral-8x7b", 4096, 32, 32, 8, 14336, 32000, 32768, 1e6f, 1e-5f, false, false},
          "llama", 0, 8, 2, 14336, 0),
      moe({"qwen1.5-moe-a2.7b", 2048, 24, 16, 16, 5632, 151936, 8192, 1e6f, 1e-6f, false, false},
          "qwen2moe", 0, 60, 4, 1408, 5632),
      moe({"qwen3moe-small", 1024, 12, 16, 4, 2048, 32000, 4096, 1e6f, 1e-6f, false, false},
          "qwen3moe", 64, 32, 4, 512, 0),
      // qwen3moe-small's dense twins (qwen3, the same attention): FFN width 4 × 512 = the active
      // experts' parameters, and 32 × 512 = all experts' (the MoE decode targets' yardsticks).
      dense_as({"qwen3moe-small-dense-active", 1024, 12, 16, 4, 2048, 32000, 4096, 1e6f, 1e-6f,
                false, false},
               "qwen3", 64),
      dense_as({"qwen3moe-small-dense-total", 1024, 12, 16, 4, 16384, 32000, 4096, 1e6f, 1e-6f,
                false, false},
               "qwen3", 64),
      moe({"qwen3moe-tiny", 256, 2, 4, 2, 768, 0, 2048, 1e6f, 1e-6f, false, false}, "qwen3moe", 128,
          8, 2, 256, 0),
      moe({"mixtral-tiny", 256, 2, 4, 2, 256, 0, 2048, 1e6f, 1e-5f, false, false}, "llama", 0, 4, 2,
          256, 0),
      moe({"qwen2moe-tiny", 256, 2, 4, 4, 768, 0, 2048, 1e6f, 1e-6f, false, false}, "qwen2moe", 0,
          8, 2, 256, 512),
  };
  return kShapes;
}

struct TensorPlan {
  std::string name;
  std::vector<int64_t> shape;  // GGML order
  DType dtype;
  float mean;  // values are mean + std · N(0,1)
  float std;
  // Rows outside [rows_begin, rows_end) are zero (when rows_end > 0): the output head of a
  // generated vocabulary gives its byte, control and padding tokens logit 0, far below the words'.
  int64_t rows_begin = 0;
  int64_t rows_end = 0;
  // Expert tensors: row r's values come from the stream of (logical tensor name, row) this
  // returns, so every expert layout holds the same values. Empty: (name, r).
  std::function<std::pair<std::string, int64_t>(int64_t)> row_source;
};

// Fills one tensor: rows generated in parallel, each from its own seeded stream.
Status fill_tensor(const TensorPlan& t, uint64_t seed, ThreadPool& pool, std::span<std::byte> out) {
  const int64_t cols = t.shape[0];
  int64_t rows = 1;
  for (size_t i = 1; i < t.shape.size(); ++i) rows *= t.shape[i];
  const size_t row_bytes = dtype_row_bytes(t.dtype, cols);
  if (out.size() != row_bytes * static_cast<size_t>(rows)) {
    return Status::internal("tensor '" + t.name + "' size mismatch");
  }
  const uint64_t base = seed ^ hash_name(t.name);
  pool.parallel_for(rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = begin; r < end; ++r) {
      uint64_t s = base + static_cast<uint64_t>(r);
      if (t.row_source) {
        const auto [name, row] = t.row_source(r);
        s = (seed ^ hash_name(name)) + static_cast<uint64_t>(row);
      }
      NormalStream normal(splitmix64(s));
      const bool zero = t.rows_end > 0 && (r < t.rows_begin || r >= t.rows_end);
      for (auto& v : row) v = zero ? 0.0f : t.mean + t.std * normal.next();
      kernels::quantize_row(t.dtype, row.data(), out.data() + static_cast<size_t>(r) * row_bytes,
                            cols);
    }
  });
  return {};
}

std::vector<float> llama3_rope_factors(int64_t head_dim, float base) {
  constexpr double kFactor = 32.0, kLow = 1.0, kHigh = 4.0, kOrigCtx = 8192.0;
  std::vector<float> out;
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double freq = std::pow(static_cast<double>(base),
                                 -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    const double wavelen = 2.0 * std::numbers::pi / freq;
    double f;
    if (wavelen < kOrigCtx / kHigh) {
      f = 1.0;
    } else if (wavelen > kOrigCtx / kLow) {
      f = kFactor;
    } else {
      const double smooth = (kOrigCtx / wavelen - kLow) / (kHigh - kLow);
      f = 1.0 / ((1.0 - smooth) / kFactor + smooth);
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

// Copies every tokenizer.* key of another GGUF; returns its vocabulary size.
Result<int64_t> copy_vocab(const std::string& from, gguf::GgufWriter& w) {
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile src,
                        gguf::GgufFile::open(from, {.mode = gguf::DataMode::kNone}));
  KEEL_ASSIGN_OR_RETURN(const gguf::Array* tokens, src.get_array("tokenizer.ggml.tokens"));
  for (const auto& kv : src.metadata()) {
    if (kv.key.rfind("tokenizer.", 0) == 0) w.set(kv.key, kv.value);
  }
  if (tokens->items.empty()) return Status::invalid_argument(from + ": empty vocabulary");
  return static_cast<int64_t>(tokens->items.size());
}

// The contiguous run of normal tokens (tokenizer.ggml.token_type 1) of a vocabulary, from the
// first normal token to the last; nullopt when the types are absent or not one run.
std::optional<ByteVocabInfo> normal_token_range(const std::string& from, int64_t n_vocab) {
  auto src = gguf::GgufFile::open(from, {.mode = gguf::DataMode::kNone});
  if (!src.ok()) return std::nullopt;
  auto types = src->get_array("tokenizer.ggml.token_type");
  if (!types.ok() || static_cast<int64_t>((*types)->items.size()) != n_vocab) return std::nullopt;
  int64_t begin = -1, end = -1;
  for (int64_t i = 0; i < n_vocab; ++i) {
    const auto v = (*types)->items[static_cast<size_t>(i)].as_int();
    const bool normal = v && *v == 1;
    if (normal && begin < 0) begin = i;
    if (normal) end = i + 1;
    if (!normal && begin >= 0 && end == i) {  // a gap closes the run; more normals later fail
      for (int64_t j = i; j < n_vocab; ++j) {
        const auto u = (*types)->items[static_cast<size_t>(j)].as_int();
        if (u && *u == 1) return std::nullopt;
      }
      break;
    }
  }
  if (begin < 0) return std::nullopt;
  return ByteVocabInfo{n_vocab, begin, end};
}

// The architecture the file is written as: the shape's own, else the spec's.
const std::string& file_arch(const RandomModelSpec& spec) {
  return spec.shape.arch.empty() ? spec.arch : spec.shape.arch;
}

// One layer's mixture-of-experts tensors (b = "blk.N."), in spec.expert_layout. Router logits
// get a spread of about 2 (std 2/√n_embd over unit-RMS inputs), so routing is decisive but not
// one-hot; experts are scaled like a dense FFN.
void plan_moe_layer(const RandomModelSpec& spec, const std::string& b, std::vector<TensorPlan>& p) {
  const ModelShape& s = spec.shape;
  const DType wt = spec.weight_type;
  const int64_t ne = s.n_expert, ff = s.n_ff_exp, d = s.n_embd;
  const float proj = 1.0f / std::sqrt(static_cast<float>(d));
  const float down = 1.0f / std::sqrt(static_cast<float>(ff));
  p.push_back({b + "ffn_gate_inp.weight", {d, ne}, DType::kF32, 0.0f, 2.0f * proj});
  // Expert e's row r of kind k ("ffn_gate", "ffn_up", "ffn_down") is stream (b + k.e, r).
  auto source = [b](const char* kind, int64_t rows) {
    return [b, kind, rows](int64_t r) {
      return std::pair<std::string, int64_t>(b + kind + "." + std::to_string(r / rows), r % rows);
    };
  };
  switch (spec.expert_layout) {
    case ExpertLayout::kStacked:
      p.push_back(
          {b + "ffn_gate_exps.weight", {d, ff, ne}, wt, 0.0f, proj, 0, 0, source("ffn_gate", ff)});
      p.push_back(
          {b + "ffn_up_exps.weight", {d, ff, ne}, wt, 0.0f, proj, 0, 0, source("ffn_up", ff)});
      break;
    case ExpertLayout::kGateUp:
      p.push_back({b + "ffn_gate_up_exps.weight",
                   {d, 2 * ff, ne},
                   wt,
                   0.0f,
                   proj,
                   0,
                   0,
                   [b, ff](int64_t r) {
                     const int64_t e = r / (2 * ff), i = r % (2 * ff);
                     return std::pair<std::string, int64_t>(
                         b + (i < ff ? "ffn_gate." : "ffn_up.") + std::to_string(e), i % ff);
                   }});
      break;
    case ExpertLayout::kPerExpert:
      for (int64_t e = 0; e < ne; ++e) {
        for (const char* kind : {"ffn_gate", "ffn_up"}) {
          const std::string n = std::string(kind) + "." + std::to_string(e);
          p.push_back({b + n + ".weight", {d, ff}, wt, 0.0f, proj});
          p.back().row_source = [b, n](int64_t r) { return std::pair(b + n, r); };
        }
        const std::string n = "ffn_down." + std::to_string(e);
        p.push_back({b + n + ".weight", {ff, d}, wt, 0.0f, down});
        p.back().row_source = [b, n](int64_t r) { return std::pair(b + n, r); };
      }
      return;
  }
  p.push_back(
      {b + "ffn_down_exps.weight", {ff, d, ne}, wt, 0.0f, down, 0, 0, source("ffn_down", d)});
  if (s.n_ff_shexp > 0) {
    const int64_t sf = s.n_ff_shexp;
    p.push_back({b + "ffn_gate_inp_shexp.weight", {d}, DType::kF32, 0.0f, proj});
    p.push_back({b + "ffn_gate_shexp.weight", {d, sf}, wt, 0.0f, proj});
    p.push_back({b + "ffn_up_shexp.weight", {d, sf}, wt, 0.0f, proj});
    p.push_back(
        {b + "ffn_down_shexp.weight", {sf, d}, wt, 0.0f, 1.0f / std::sqrt(static_cast<float>(sf))});
  }
}

// `words` (a generated vocabulary's, or a copied one's run of normal tokens) marks the token rows
// the output head should favour.
std::vector<TensorPlan> plan_tensors(const RandomModelSpec& spec, int64_t n_vocab,
                                     const std::optional<ByteVocabInfo>& words) {
  const ModelShape& s = spec.shape;
  const std::string& arch = file_arch(spec);
  const int64_t hd = s.head_size();
  const DType wt = spec.weight_type;
  const float proj = 1.0f / std::sqrt(static_cast<float>(s.n_embd));
  const float down = 1.0f / std::sqrt(static_cast<float>(s.n_ff));
  std::vector<TensorPlan> p;
  p.push_back({"token_embd.weight", {s.n_embd, n_vocab}, wt, 0.0f, 1.0f});
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    p.push_back({b + "attn_norm.weight", {s.n_embd}, DType::kF32, 1.0f, 0.0f});
    p.push_back({b + "attn_q.weight", {s.n_embd, s.n_head * hd}, wt, 0.0f, proj});
    p.push_back({b + "attn_k.weight", {s.n_embd, s.n_head_kv * hd}, wt, 0.0f, proj});
    p.push_back({b + "attn_v.weight", {s.n_embd, s.n_head_kv * hd}, wt, 0.0f, proj});
    if (has_qkv_bias(arch)) {
      p.push_back({b + "attn_q.bias", {s.n_head * hd}, DType::kF32, 0.0f, 0.02f});
      p.push_back({b + "attn_k.bias", {s.n_head_kv * hd}, DType::kF32, 0.0f, 0.02f});
      p.push_back({b + "attn_v.bias", {s.n_head_kv * hd}, DType::kF32, 0.0f, 0.02f});
    }
    if (has_qk_norm(arch)) {
      p.push_back({b + "attn_q_norm.weight", {hd}, DType::kF32, 1.0f, 0.0f});
      p.push_back({b + "attn_k_norm.weight", {hd}, DType::kF32, 1.0f, 0.0f});
    }
    p.push_back({b + "attn_output.weight", {s.n_head * hd, s.n_embd}, wt, 0.0f, proj});
    p.push_back({b + "ffn_norm.weight", {s.n_embd}, DType::kF32, 1.0f, 0.0f});
    if (s.n_expert > 0) {
      plan_moe_layer(spec, b, p);
      continue;
    }
    p.push_back({b + "ffn_gate.weight", {s.n_embd, s.n_ff}, wt, 0.0f, proj});
    p.push_back({b + "ffn_up.weight", {s.n_embd, s.n_ff}, wt, 0.0f, proj});
    p.push_back({b + "ffn_down.weight", {s.n_ff, s.n_embd}, wt, 0.0f, down});
  }
  p.push_back({"output_norm.weight", {s.n_embd}, DType::kF32, 1.0f, 0.0f});
  if (!s.tied_output) p.push_back({"output.weight", {s.n_embd, n_vocab}, wt, 0.0f, proj});
  if (words) {
    // Logits with a spread of several units for words and exactly 0 for everything else, so
    // sampled text stays words. (A tied head is the embedding, whose std 1 is spread enough.)
    TensorPlan& head = s.tied_output ? p.front() : p.back();
    if (!s.tied_output) head.std = 4.0f / std::sqrt(static_cast<float>(s.n_embd));
    head.rows_begin = words->words_begin;
    head.rows_end = words->words_end;
  }
  return p;
}

void set_hparams(const RandomModelSpec& spec, gguf::GgufWriter& w) {
  const ModelShape& s = spec.shape;
  const std::string& a = file_arch(spec);
  const int64_t hd = s.head_size();
  w.set("general.architecture", a);
  w.set("general.name", spec.name.empty()
                            ? "keel " + s.name + " " + std::string(dtype_name(spec.weight_type)) +
                                  " (random weights)"
                            : spec.name);
  w.set("general.description",
        std::string("random weights written by keel make-model; its text is noise"));
  w.set("general.file_type", llama_file_type(spec.weight_type));
  w.set("keel.random_weights", true);
  w.set("keel.random_seed", uint64_t{spec.seed});
  w.set(a + ".context_length", uint32_t(s.n_ctx));
  w.set(a + ".embedding_length", uint32_t(s.n_embd));
  w.set(a + ".block_count", uint32_t(s.n_layer));
  w.set(a + ".feed_forward_length", uint32_t(s.n_ff));
  w.set(a + ".attention.head_count", uint32_t(s.n_head));
  w.set(a + ".attention.head_count_kv", uint32_t(s.n_head_kv));
  w.set(a + ".attention.layer_norm_rms_epsilon", s.rms_eps);
  w.set(a + ".rope.freq_base", s.rope_base);
  w.set(a + ".rope.dimension_count", uint32_t(hd));
  if (has_qk_norm(a) || hd * s.n_head != s.n_embd) {
    w.set(a + ".attention.key_length", uint32_t(hd));
    w.set(a + ".attention.value_length", uint32_t(hd));
  }
  if (!spec.rope_scaling.empty()) {
    w.set(a + ".rope.scaling.type", spec.rope_scaling);
    if (spec.rope_scale > 0.0f) w.set(a + ".rope.scaling.factor", spec.rope_scale);
    if (spec.rope_scaling == "yarn") {
      w.set(a + ".rope.scaling.original_context_length",
            uint32_t(spec.rope_orig_ctx > 0 ? spec.rope_orig_ctx : s.n_ctx));
    }
  }
  if (s.n_expert > 0) {
    w.set(a + ".expert_count", uint32_t(s.n_expert));
    w.set(a + ".expert_used_count", uint32_t(s.n_expert_used));
    if (a != "llama") w.set(a + ".expert_feed_forward_length", uint32_t(s.n_ff_exp));
    if (s.n_ff_shexp > 0) {
      w.set(a + ".expert_shared_feed_forward_length", uint32_t(s.n_ff_shexp));
    }
  }
}

}  // namespace

uint32_t llama_file_type(DType t) {
  switch (t) {
    case DType::kF32:
      return 0;
    case DType::kF16:
      return 1;
    case DType::kQ4_0:
      return 2;
    case DType::kQ8_0:
      return 7;
    case DType::kBF16:
      return 32;
    case DType::kQ4_K:
      return 14;  // MOSTLY_Q4_K_S: every matrix Q4_K
    default:
      return 0;
  }
}

std::optional<ModelShape> find_model_shape(const std::string& name) {
  for (const auto& s : shapes()) {
    if (s.name == name) return s;
  }
  return std::nullopt;
}

std::vector<std::string> model_shape_names() {
  std::vector<std::string> out;
  for (const auto& s : shapes()) out.push_back(s.name);
  return out;
}

std::string rope_scaling_summary(const RandomModelSpec& spec) {
  if (spec.rope_scaling.empty()) return "";
  char buf[96];
  std::snprintf(buf, sizeof buf, ", RoPE scaling %s x%g", spec.rope_scaling.c_str(),
                static_cast<double>(spec.rope_scale));
  std::string out = buf;
  if (spec.rope_scaling == "yarn") {
    out += " of " + std::to_string(spec.rope_orig_ctx > 0 ? spec.rope_orig_ctx : spec.shape.n_ctx);
  }
  return out;
}

Status write_random_model(const RandomModelSpec& spec, const std::string& path, ThreadPool& pool,
                          const std::function<void(size_t, size_t)>& progress) {
  const std::string& arch = file_arch(spec);
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3" && arch != "qwen2moe" &&
      arch != "qwen3moe") {
    return Status::invalid_argument("unknown architecture '" + arch +
                                    "' (expected llama, qwen2, qwen3, qwen2moe or qwen3moe)");
  }
  const ModelShape& sh = spec.shape;
  const bool moe_arch = arch == "qwen2moe" || arch == "qwen3moe";
  if ((sh.n_expert > 0) != (moe_arch || (arch == "llama" && sh.n_expert > 0)) ||
      (sh.n_expert > 0 && (sh.n_expert_used < 1 || sh.n_expert_used > sh.n_expert ||
                           sh.n_ff_exp < 1 || (arch == "llama" && sh.n_ff_exp != sh.n_ff)))) {
    return Status::invalid_argument("shape " + sh.name + " does not fit architecture " + arch);
  }
  if (spec.expert_layout == ExpertLayout::kPerExpert && arch != "llama") {
    return Status::invalid_argument("one tensor per expert is a llama (Mixtral) layout only");
  }
  if (!spec.rope_scaling.empty() && spec.rope_scaling != "none" && spec.rope_scaling != "linear" &&
      spec.rope_scaling != "yarn") {
    return Status::invalid_argument("unknown RoPE scaling '" + spec.rope_scaling +
                                    "' (expected none, linear or yarn)");
  }
  if ((spec.rope_scaling == "linear" || spec.rope_scaling == "yarn") &&
      !(spec.rope_scale > 0.0f && std::isfinite(spec.rope_scale))) {
    return Status::invalid_argument(spec.rope_scaling + " RoPE scaling needs a factor > 0");
  }
  if (spec.rope_scaling.empty() && (spec.rope_scale != 0.0f || spec.rope_orig_ctx != 0)) {
    return Status::invalid_argument(
        "a RoPE factor or original context need --rope-scaling (a scaling type)");
  }
  if (spec.rope_orig_ctx != 0 && spec.rope_scaling != "yarn") {
    return Status::invalid_argument("the RoPE original context length is YaRN's only");
  }
  if (spec.rope_orig_ctx < 0 || spec.rope_orig_ctx > UINT32_MAX) {
    return Status::invalid_argument("RoPE original context length out of range");
  }
  if (!kernels::quantize_supports(spec.weight_type)) {
    return Status::invalid_argument("cannot write weights of type " +
                                    std::string(dtype_name(spec.weight_type)));
  }
  const ModelShape& s = spec.shape;
  const int64_t block = dtype_info(spec.weight_type).block_size;
  if ((s.head_dim == 0 && s.n_embd % s.n_head != 0) || s.n_head % s.n_head_kv != 0 ||
      s.n_embd % block != 0 || s.n_ff % block != 0 || s.n_ff_exp % block != 0 ||
      s.n_ff_shexp % block != 0) {
    return Status::invalid_argument("shape " + s.name + " does not fit weight type " +
                                    std::string(dtype_name(spec.weight_type)));
  }
  gguf::GgufWriter w;
  set_hparams(spec, w);
  int64_t n_vocab = 0;
  std::optional<ByteVocabInfo> words;
  if (spec.vocab_from.empty() || spec.vocab_from == "byte") {
    words = add_byte_vocab(w, s.n_vocab);
    n_vocab = words->n_vocab;
  } else {
    KEEL_ASSIGN_OR_RETURN(n_vocab, copy_vocab(spec.vocab_from, w));
    // The head favours the copied vocabulary's normal tokens too, so greedy text is words (valid
    // UTF-8, which llama-server's output parser insists on), not byte tokens.
    words = normal_token_range(spec.vocab_from, n_vocab);
  }
  for (const TensorPlan& t : plan_tensors(spec, n_vocab, words)) {
    KEEL_TRY(w.add_tensor(t.name, t.dtype, t.shape, [t, &spec, &pool](std::span<std::byte> out) {
      return fill_tensor(t, spec.seed, pool, out);
    }));
  }
  if (s.llama3_rope) {
    const std::vector<float> f = llama3_rope_factors(s.head_size(), s.rope_base);
    KEEL_TRY(w.add_tensor("rope_freqs.weight", DType::kF32, {static_cast<int64_t>(f.size())},
                          std::as_bytes(std::span<const float>(f))));
  }
  return w.write(path, nullptr, progress);
}

}  // namespace keel::model
