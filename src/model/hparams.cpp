// parse_hparams: metadata keys → HParams, with range and consistency checks. Optional keys take
// llama.cpp's defaults; a present key of the wrong type is an error, never silently ignored.
#include "model/hparams.h"

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "kernels/rope.h"

namespace keel::model {
namespace {

// Upper bounds that keep every product of two counts far from int64 overflow.
constexpr int64_t kMaxWidth = int64_t{1} << 20;  // embedding, FFN, head dimension
constexpr int64_t kMaxCount = int64_t{1} << 14;  // layers, heads
constexpr int64_t kMaxContext = int64_t{1} << 24;
constexpr int64_t kMaxExperts = 1024;

std::optional<Arch> arch_from_name(std::string_view name) {
  for (Arch a : {Arch::kLlama, Arch::kQwen2, Arch::kQwen3, Arch::kQwen2Moe, Arch::kQwen3Moe}) {
    if (arch_name(a) == name) return a;
  }
  return std::nullopt;
}

// llama.cpp's mixture-of-experts architectures that keel does not run (yet).
bool is_unsupported_moe_arch(std::string_view name) {
  for (std::string_view a :
       {"deepseek",   "deepseek2",   "deepseek3",  "gpt-oss",      "dbrx",        "grok",
        "arctic",     "olmoe",       "granitemoe", "llama4",       "phimoe",      "qwen3next",
        "bailingmoe", "bailingmoe2", "glm4moe",    "ernie4_5-moe", "hunyuan-moe", "dots1",
        "minimax-m2", "jamba",       "exaone-moe", "afmoe",        "grovemoe"}) {
    if (a == name) return true;
  }
  return false;
}

class KeyReader {
 public:
  KeyReader(const gguf::GgufFile& file, std::string_view arch) : file_(file), prefix_(arch) {}

  std::string key(std::string_view suffix) const { return prefix_ + "." + std::string(suffix); }

  // A required integer in [1, max].
  Result<int64_t> count(std::string_view suffix, int64_t max) const {
    const std::string k = key(suffix);
    KEEL_ASSIGN_OR_RETURN(int64_t v, file_.get_int(k));
    KEEL_TRY(check_range(k, v, max));
    return v;
  }
  // An optional integer in [1, max]; `fallback` when absent.
  Result<int64_t> count_or(std::string_view suffix, int64_t max, int64_t fallback) const {
    if (!file_.find(key(suffix))) return fallback;
    return count(suffix, max);
  }
  // An optional positive finite float; `fallback` when absent.
  Result<double> positive_or(std::string_view suffix, std::optional<double> fallback) const {
    const std::string k = key(suffix);
    if (!file_.find(k) && fallback) return *fallback;
    KEEL_ASSIGN_OR_RETURN(double v, file_.get_float(k));
    if (!std::isfinite(v) || v <= 0.0) {
      return Status::invalid_argument(file_.path() + ": metadata key '" + k +
                                      "' must be a positive number, got " + std::to_string(v));
    }
    return v;
  }

  Status fail(std::string_view message) const {
    return Status::invalid_argument(file_.path() + ": " + std::string(message));
  }

 private:
  Status check_range(const std::string& k, int64_t v, int64_t max) const {
    if (v >= 1 && v <= max) return Status();
    return Status::invalid_argument(file_.path() + ": metadata key '" + k +
                                    "' = " + std::to_string(v) + " is out of range [1, " +
                                    std::to_string(max) + "]");
  }

  const gguf::GgufFile& file_;
  std::string prefix_;
};

// YaRN keys that llama.cpp's loader reads only for other architectures (grok, deepseek2, ...):
// for llama, qwen2(moe) and qwen3(moe) it uses its defaults whatever the file says. A present key
// must hold that default; any other value is Unsupported rather than silently dropped or
// computed differently from llama.cpp.
Status check_unread_yarn_keys(const gguf::GgufFile& file, const KeyReader& keys, Arch hp_arch,
                              bool yarn) {
  const struct {
    const char* suffix;
    double used;  // what llama.cpp computes with
  } kUnread[] = {{"rope.scaling.yarn_ext_factor", yarn ? 1.0 : 0.0},
                 {"rope.scaling.yarn_attn_factor", 1.0},
                 {"rope.scaling.yarn_beta_fast", 32.0},
                 {"rope.scaling.yarn_beta_slow", 1.0},
                 {"rope.scaling.yarn_log_multiplier", 0.0}};
  for (const auto& k : kUnread) {
    const std::string key = keys.key(k.suffix);
    if (!file.find(key)) continue;
    KEEL_ASSIGN_OR_RETURN(double v, file.get_float(key));
    if (v != k.used) {
      char values[64];
      std::snprintf(values, sizeof values, " = %g is not supported (llama.cpp uses %g)", v, k.used);
      return Status::unsupported(
          file.path() + ": " + key + values + ": llama.cpp does not read this key for " +
          std::string(arch_name(hp_arch)) + ", and keel computes RoPE as llama.cpp does");
    }
  }
  return Status();
}

// RoPE scaling as llama.cpp reads it (llama_model::load_hparams, then llama_context's
// constructor with llama-server's defaults): rope.scaling.type "none", "linear" (also when
// absent) or "yarn"; rope.scaling.factor (old name rope.scale_linear) gives freq_scale =
// 1 / factor ("none" keeps 1); rope.scaling.attn_factor (default 1) scales cos and sin. YaRN:
// ext_factor 1, the ramp of kernels::yarn_corr_dims with beta_fast 32 and beta_slow 1 over
// rope.scaling.original_context_length (default context_length), and cos and sin scaled by
// mscale = get_mscale(factor) / (1 + 0.1 ln factor) · attn_factor · (1 + 0.1 ln(1 / freq_scale)),
// get_mscale(f) = f ≤ 1 ? 1 : 1 + 0.1 ln f — llama.cpp's steps in its f32 arithmetic.
Status parse_rope_scaling(const gguf::GgufFile& file, const KeyReader& keys, HParams& hp) {
  kernels::RopeParams& rope = hp.rope;
  std::string type = "linear";
  const std::string type_key = keys.key("rope.scaling.type");
  if (file.find(type_key)) {
    KEEL_ASSIGN_OR_RETURN(type, file.get_string(type_key));
  }
  if (type != "none" && type != "linear" && type != "yarn") {
    return Status::unsupported(file.path() + ": " + type_key + " = '" + type +
                               "' is not supported (keel supports none, linear, yarn, and "
                               "llama3-style rope_freqs.weight)");
  }
  std::optional<double> factor;
  for (const char* suffix : {"rope.scaling.factor", "rope.scale_linear"}) {
    if (!factor && file.find(keys.key(suffix))) {
      KEEL_ASSIGN_OR_RETURN(factor, keys.positive_or(suffix, std::nullopt));
    }
  }
  rope.freq_scale = factor && type != "none" ? 1.0f / static_cast<float>(*factor) : 1.0f;
  KEEL_ASSIGN_OR_RETURN(double attn_factor, keys.positive_or("rope.scaling.attn_factor", 1.0));
  KEEL_TRY(check_unread_yarn_keys(file, keys, hp.arch, type == "yarn"));
  KEEL_ASSIGN_OR_RETURN(hp.n_ctx_orig_yarn, keys.count_or("rope.scaling.original_context_length",
                                                          kMaxContext, hp.n_ctx_train));
  if (type != "yarn") {
    rope.mscale = static_cast<float>(attn_factor);
    return Status();
  }
  rope.ext_factor = 1.0f;
  const kernels::YarnRamp ramp =
      kernels::yarn_corr_dims(rope.n_rot, hp.n_ctx_orig_yarn, rope.freq_base, 32.0f, 1.0f);
  rope.yarn_low = ramp.low;
  rope.yarn_high = ramp.high;
  const float f = 1.0f / rope.freq_scale;
  float attn = f <= 1.0f ? 1.0f : 0.1f * std::log(f) + 1.0f;
  attn *= 1.0f / (1.0f + 0.1f * std::log(f));
  attn *= static_cast<float>(attn_factor);
  rope.mscale = attn * (1.0f + 0.1f * std::log(1.0f / rope.freq_scale));
  return Status();
}

// Keys that would change the MoE computation in ways keel does not implement: a gating function
// other than softmax (expert_gating_func 1) or a weight scale other than 1.
Status check_moe_variants(const gguf::GgufFile& file, const KeyReader& keys) {
  const std::string gating = keys.key("expert_gating_func");
  if (file.find(gating)) {
    KEEL_ASSIGN_OR_RETURN(int64_t g, file.get_int(gating));
    if (g != 1) {
      return Status::unsupported(file.path() + ": " + gating + " = " + std::to_string(g) +
                                 " is not supported (keel's MoE router is softmax, 1)");
    }
  }
  const std::string scale = keys.key("expert_weights_scale");
  if (file.find(scale)) {
    KEEL_ASSIGN_OR_RETURN(double w, file.get_float(scale));
    if (w != 0.0 && w != 1.0) {
      return Status::unsupported(file.path() + ": " + scale + " = " + std::to_string(w) +
                                 " is not supported (keel does not scale expert weights)");
    }
  }
  return Status();
}

// The MoE keys (see MoeParams). expert_count is required for qwen2moe/qwen3moe and optional for
// llama (absent or 0: dense); every other architecture must not set it.
Status parse_moe(const gguf::GgufFile& file, const KeyReader& keys, HParams& hp) {
  const bool moe_arch = hp.arch == Arch::kQwen2Moe || hp.arch == Arch::kQwen3Moe;
  const std::string count_key = keys.key("expert_count");
  int64_t n_expert = 0;
  if (moe_arch) {
    KEEL_ASSIGN_OR_RETURN(n_expert, keys.count("expert_count", kMaxExperts));
  } else if (file.find(count_key)) {
    KEEL_ASSIGN_OR_RETURN(n_expert, file.get_int(count_key));
    if (n_expert != 0 && hp.arch != Arch::kLlama) {
      return Status::unsupported(file.path() + ": " + count_key + " = " + std::to_string(n_expert) +
                                 ": keel runs mixture-of-experts " +
                                 "models only as llama (Mixtral), qwen2moe or qwen3moe");
    }
    if (n_expert != 0) {
      KEEL_ASSIGN_OR_RETURN(n_expert, keys.count("expert_count", kMaxExperts));
    }
  }
  if (n_expert == 0) return Status();
  MoeParams& m = hp.moe;
  m.n_expert = n_expert;
  KEEL_ASSIGN_OR_RETURN(m.n_expert_used, keys.count("expert_used_count", kMaxExperts));
  if (m.n_expert_used > m.n_expert) {
    return keys.fail(keys.key("expert_used_count") + " (" + std::to_string(m.n_expert_used) +
                     ") exceeds " + count_key + " (" + std::to_string(m.n_expert) + ")");
  }
  m.norm_weights = hp.arch != Arch::kQwen2Moe;  // llama.cpp: build_moe_ffn's norm_w per arch
  KEEL_TRY(check_moe_variants(file, keys));
  if (hp.arch == Arch::kLlama) {
    m.n_ff_exp = hp.n_ff;  // Mixtral's experts are feed_forward_length wide
    return Status();
  }
  const int64_t fallback = hp.n_ff / m.n_expert_used;
  if (!file.find(keys.key("expert_feed_forward_length")) && fallback == 0) {
    return keys.fail("neither " + keys.key("expert_feed_forward_length") + " nor " +
                     keys.key("feed_forward_length") + " gives the experts' FFN width");
  }
  KEEL_ASSIGN_OR_RETURN(m.n_ff_exp,
                        keys.count_or("expert_feed_forward_length", kMaxWidth, fallback));
  if (hp.arch == Arch::kQwen2Moe) {
    const std::string shexp = keys.key("expert_shared_feed_forward_length");
    if (!file.find(shexp) && hp.n_ff == 0) {
      return keys.fail("neither " + shexp + " nor " + keys.key("feed_forward_length") +
                       " gives the shared expert's FFN width");
    }
    KEEL_ASSIGN_OR_RETURN(m.n_ff_shexp,
                          keys.count_or("expert_shared_feed_forward_length", kMaxWidth, hp.n_ff));
  }
  return Status();
}

Status check_consistency(const HParams& hp, const KeyReader& keys) {
  if (hp.n_head % hp.n_head_kv != 0) {
    return keys.fail(keys.key("attention.head_count") + " (" + std::to_string(hp.n_head) +
                     ") is not a multiple of " + keys.key("attention.head_count_kv") + " (" +
                     std::to_string(hp.n_head_kv) + ")");
  }
  if (hp.rope.n_rot % 2 != 0 || hp.rope.n_rot > hp.head_dim) {
    return keys.fail(keys.key("rope.dimension_count") + " (" + std::to_string(hp.rope.n_rot) +
                     ") must be even and at most the head dimension (" +
                     std::to_string(hp.head_dim) + ")");
  }
  return Status();
}

}  // namespace

std::string_view arch_name(Arch arch) {
  switch (arch) {
    case Arch::kLlama:
      return "llama";
    case Arch::kQwen2:
      return "qwen2";
    case Arch::kQwen3:
      return "qwen3";
    case Arch::kQwen2Moe:
      return "qwen2moe";
    case Arch::kQwen3Moe:
      return "qwen3moe";
  }
  return "unknown";
}

Result<HParams> parse_hparams(const gguf::GgufFile& file) {
  KEEL_ASSIGN_OR_RETURN(std::string arch_str, file.get_string("general.architecture"));
  const std::optional<Arch> arch = arch_from_name(arch_str);
  if (!arch && is_unsupported_moe_arch(arch_str)) {
    return Status::unsupported(file.path() + ": mixture-of-experts architecture '" + arch_str +
                               "' (general.architecture) is not supported; keel runs MoE "
                               "models of llama (Mixtral), qwen2moe and qwen3moe");
  }
  if (!arch) {
    return Status::unsupported(file.path() + ": architecture '" + arch_str +
                               "' (general.architecture) is not supported; keel supports "
                               "llama, qwen2, qwen3, qwen2moe and qwen3moe");
  }
  const KeyReader keys(file, arch_str);
  HParams hp;
  hp.arch = *arch;
  KEEL_ASSIGN_OR_RETURN(hp.n_ctx_train, keys.count("context_length", kMaxContext));
  KEEL_ASSIGN_OR_RETURN(hp.n_embd, keys.count("embedding_length", kMaxWidth));
  KEEL_ASSIGN_OR_RETURN(hp.n_layer, keys.count("block_count", kMaxCount));
  const bool moe_arch = hp.arch == Arch::kQwen2Moe || hp.arch == Arch::kQwen3Moe;
  if (moe_arch) {  // llama.cpp reads it as optional for these
    KEEL_ASSIGN_OR_RETURN(hp.n_ff, keys.count_or("feed_forward_length", kMaxWidth, 0));
  } else {
    KEEL_ASSIGN_OR_RETURN(hp.n_ff, keys.count("feed_forward_length", kMaxWidth));
  }
  KEEL_ASSIGN_OR_RETURN(hp.n_head, keys.count("attention.head_count", kMaxCount));
  KEEL_ASSIGN_OR_RETURN(hp.n_head_kv,
                        keys.count_or("attention.head_count_kv", kMaxCount, hp.n_head));
  KEEL_TRY(parse_moe(file, keys, hp));
  const bool divisible = hp.n_embd % hp.n_head == 0;
  const std::string key_length = keys.key("attention.key_length");
  if (!divisible && !file.find(key_length)) {
    return keys.fail(keys.key("embedding_length") + " (" + std::to_string(hp.n_embd) +
                     ") is not a multiple of " + keys.key("attention.head_count") + " (" +
                     std::to_string(hp.n_head) + ") and " + key_length + " is absent");
  }
  KEEL_ASSIGN_OR_RETURN(hp.head_dim,
                        keys.count_or("attention.key_length", kMaxWidth, hp.n_embd / hp.n_head));
  KEEL_ASSIGN_OR_RETURN(int64_t value_dim,
                        keys.count_or("attention.value_length", kMaxWidth, hp.head_dim));
  if (value_dim != hp.head_dim) {
    return Status::unsupported(file.path() + ": " + keys.key("attention.value_length") + " (" +
                               std::to_string(value_dim) + ") differs from the key length (" +
                               std::to_string(hp.head_dim) + "), which keel does not support");
  }
  KEEL_ASSIGN_OR_RETURN(double eps,
                        keys.positive_or("attention.layer_norm_rms_epsilon", std::nullopt));
  hp.rms_eps = static_cast<float>(eps);
  KEEL_ASSIGN_OR_RETURN(hp.rope.n_rot,
                        keys.count_or("rope.dimension_count", kMaxWidth, hp.head_dim));
  KEEL_ASSIGN_OR_RETURN(double base, keys.positive_or("rope.freq_base", 10000.0));
  hp.rope.freq_base = static_cast<float>(base);
  hp.rope.neox = hp.arch != Arch::kLlama;
  hp.qkv_bias = hp.arch == Arch::kQwen2 || hp.arch == Arch::kQwen2Moe;
  hp.qk_norm = hp.arch == Arch::kQwen3 || hp.arch == Arch::kQwen3Moe;
  KEEL_TRY(check_consistency(hp, keys));
  KEEL_TRY(parse_rope_scaling(file, keys, hp));
  return hp;
}

}  // namespace keel::model
