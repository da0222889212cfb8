// summarize_lora and lora_content_digest (see lora_summary.h).
#include "model/lora_summary.h"

#include <xxhash.h>

#include <cmath>
#include <cstring>
#include <map>
#include <utility>

#include "core/check.h"
#include "model/lora_adapter.h"

namespace keel::model {
namespace {

using Pair = std::pair<const gguf::TensorInfo*, const gguf::TensorInfo*>;

// Tensors by base name (".lora_a"/".lora_b" cut), in name order: the digest must not depend on
// the file's tensor order. Other names are skipped (the callers refuse them).
std::map<std::string, Pair> pairs_by_base_name(const gguf::GgufFile& file) {
  std::map<std::string, Pair> pairs;
  for (const gguf::TensorInfo& t : file.tensors()) {
    const bool is_a = t.name.ends_with(".lora_a"), is_b = t.name.ends_with(".lora_b");
    if (!is_a && !is_b) continue;
    auto& pair = pairs[t.name.substr(0, t.name.size() - 7)];
    (is_a ? pair.first : pair.second) = &t;
  }
  return pairs;
}

Status check_header(const gguf::GgufFile& file) {
  for (const auto& [key, want] : {std::pair<const char*, const char*>{"general.type", "adapter"},
                                  std::pair<const char*, const char*>{"adapter.type", "lora"}}) {
    Result<std::string> v = file.get_string(key);
    if (!v.ok() || *v != want) {
      return Status::invalid_argument(file.path() + ": not a LoRA adapter (" + key + " is " +
                                      (v.ok() ? "'" + *v + "'" : std::string("missing")) +
                                      ", expected '" + want + "')");
    }
  }
  return Status();
}

// "q,k,..." of the targets some pair's base name adapts.
std::string targets_of(const std::map<std::string, Pair>& pairs) {
  std::string out;
  for (size_t t = 0; t < kNumLoraTargets; ++t) {
    const std::string full = lora_base_tensor_name(static_cast<LoraTarget>(t), 0);
    const std::string suffix = full.substr(full.find('.', 4));  // ".attn_q.weight"
    for (const auto& [name, pair] : pairs) {
      if (!name.ends_with(suffix)) continue;
      out += (out.empty() ? "" : ",") + std::string(lora_target_name(static_cast<LoraTarget>(t)));
      break;
    }
  }
  return out;
}

}  // namespace

std::array<uint64_t, 2> lora_content_digest(const gguf::GgufFile& file, float effective_scale) {
  XXH3_state_t* state = XXH3_createState();
  KEEL_CHECK(state != nullptr);
  XXH3_128bits_reset(state);
  for (const auto& [name, pair] : pairs_by_base_name(file)) {
    for (const gguf::TensorInfo* t : {pair.first, pair.second}) {
      if (t == nullptr) continue;
      const auto bytes = file.tensor_data(*t);
      const auto type = static_cast<uint32_t>(t->dtype);
      XXH3_128bits_update(state, t->name.data(), t->name.size());
      XXH3_128bits_update(state, &type, sizeof(type));
      XXH3_128bits_update(state, t->shape.data(), t->shape.size() * sizeof(int64_t));
      XXH3_128bits_update(state, bytes.data(), bytes.size());
    }
  }
  const XXH128_hash_t tensors = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  // The digest of the tensors, then the scale they are applied with.
  std::byte mix[2 * sizeof(uint64_t) + sizeof(float)];
  const uint64_t words[2] = {tensors.low64, tensors.high64};
  std::memcpy(mix, words, 2 * sizeof(uint64_t));
  std::memcpy(mix + 2 * sizeof(uint64_t), &effective_scale, sizeof(float));
  const XXH128_hash_t h = XXH3_128bits(mix, sizeof(mix));
  return {h.low64, h.high64};
}

Result<LoraSummary> summarize_lora(const std::string& path, float scale) {
  if (!std::isfinite(scale)) {
    return Status::invalid_argument(path + ": the adapter scale must be finite");
  }
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile file, gguf::GgufFile::open(path));
  KEEL_TRY(check_header(file));
  float alpha = 0.0f;
  if (file.find("adapter.lora.alpha") != nullptr) {
    KEEL_ASSIGN_OR_RETURN(const double v, file.get_float("adapter.lora.alpha"));
    if (!std::isfinite(v))
      return Status::invalid_argument(path + ": adapter.lora.alpha is not finite");
    alpha = static_cast<float>(v);
  }
  const std::map<std::string, Pair> pairs = pairs_by_base_name(file);
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (!t.name.ends_with(".lora_a") && !t.name.ends_with(".lora_b")) {
      return Status::invalid_argument(path + ": tensor '" + t.name +
                                      "' is neither a .lora_a nor a .lora_b tensor");
    }
  }
  if (pairs.empty()) return Status::invalid_argument(path + ": the adapter has no tensors");
  LoraSummary s;
  s.path = path;
  for (const auto& [name, pair] : pairs) {
    if (pair.first == nullptr || pair.second == nullptr) {
      return Status::invalid_argument(path + ": '" + name + "' is not a lora_a/lora_b pair");
    }
    if (s.rank == 0 && pair.first->shape.size() == 2) s.rank = pair.first->shape[1];
  }
  if (s.rank < 1) return Status::invalid_argument(path + ": the adapter's rank is not positive");
  s.effective_scale = alpha != 0.0f ? scale * alpha / static_cast<float>(s.rank) : scale;
  s.targets = targets_of(pairs);
  s.content_digest = lora_content_digest(file, s.effective_scale);
  return s;
}

}  // namespace keel::model
