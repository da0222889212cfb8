// parse_hparams: metadata keys → HParams, with range and consistency checks. Optional keys take
// llama.cpp's defaults; a present key of the wrong type is an error, never silently ignored.
#include "model/hparams.h"

#include <cmath>
#include <optional>
#include <string>

namespace keel::model {
namespace {

// Upper bounds that keep every product of two counts far from int64 overflow.
constexpr int64_t kMaxWidth = int64_t{1} << 20;  // embedding, FFN, head dimension
constexpr int64_t kMaxCount = int64_t{1} << 14;  // layers, heads
constexpr int64_t kMaxContext = int64_t{1} << 24;

std::optional<Arch> arch_from_name(std::string_view name) {
  for (Arch a : {Arch::kLlama, Arch::kQwen2, Arch::kQwen3}) {
    if (arch_name(a) == name) return a;
  }
  return std::nullopt;
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

// Rope scaling: "none" / absent / "linear" use freq_scale = 1 / factor; others are unsupported.
Result<float> rope_freq_scale(const gguf::GgufFile& file, const KeyReader& keys) {
  std::string type = "linear";
  const std::string type_key = keys.key("rope.scaling.type");
  if (file.find(type_key)) {
    KEEL_ASSIGN_OR_RETURN(type, file.get_string(type_key));
  }
  if (type == "none") return 1.0f;
  if (type != "linear") {
    return Status::unsupported(file.path() + ": " + type_key + " = '" + type +
                               "' is not supported (keel supports none, linear, and llama3-style "
                               "rope_freqs.weight)");
  }
  std::optional<double> factor;
  for (const char* suffix : {"rope.scaling.factor", "rope.scale_linear"}) {
    if (!factor && file.find(keys.key(suffix))) {
      KEEL_ASSIGN_OR_RETURN(factor, keys.positive_or(suffix, std::nullopt));
    }
  }
  return factor ? static_cast<float>(1.0 / *factor) : 1.0f;
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
  }
  return "unknown";
}

Result<HParams> parse_hparams(const gguf::GgufFile& file) {
  KEEL_ASSIGN_OR_RETURN(std::string arch_str, file.get_string("general.architecture"));
  const std::optional<Arch> arch = arch_from_name(arch_str);
  if (!arch) {
    return Status::unsupported(file.path() + ": architecture '" + arch_str +
                               "' (general.architecture) is not supported; keel supports "
                               "llama, qwen2 and qwen3");
  }
  const KeyReader keys(file, arch_str);
  HParams hp;
  hp.arch = *arch;
  KEEL_ASSIGN_OR_RETURN(hp.n_ctx_train, keys.count("context_length", kMaxContext));
  KEEL_ASSIGN_OR_RETURN(hp.n_embd, keys.count("embedding_length", kMaxWidth));
  KEEL_ASSIGN_OR_RETURN(hp.n_layer, keys.count("block_count", kMaxCount));
  KEEL_ASSIGN_OR_RETURN(hp.n_ff, keys.count("feed_forward_length", kMaxWidth));
  KEEL_ASSIGN_OR_RETURN(hp.n_head, keys.count("attention.head_count", kMaxCount));
  KEEL_ASSIGN_OR_RETURN(hp.n_head_kv,
                        keys.count_or("attention.head_count_kv", kMaxCount, hp.n_head));
  if (file.find(keys.key("expert_count"))) {
    KEEL_ASSIGN_OR_RETURN(int64_t experts, file.get_int(keys.key("expert_count")));
    if (experts > 0) {
      return Status::unsupported(file.path() + ": mixture-of-experts models (" +
                                 keys.key("expert_count") + " = " + std::to_string(experts) +
                                 ") are not supported");
    }
  }
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
  KEEL_ASSIGN_OR_RETURN(hp.rope.freq_scale, rope_freq_scale(file, keys));
  hp.rope.neox = hp.arch != Arch::kLlama;
  hp.qkv_bias = hp.arch == Arch::kQwen2;
  hp.qk_norm = hp.arch == Arch::kQwen3;
  KEEL_TRY(check_consistency(hp, keys));
  return hp;
}

}  // namespace keel::model
