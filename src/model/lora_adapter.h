// LoraAdapter: a LoRA adapter in llama.cpp's GGUF adapter format, validated against the base
// model it will run on. The file holds `general.type` = "adapter", `adapter.type` = "lora",
// `general.architecture` (the base model's), an optional `adapter.lora.alpha` (f32) and, per
// adapted base matrix W named N (e.g. "blk.0.attn_q.weight"), two tensors:
//   N.lora_a  GGML shape {in, rank}   a Matrix of `rank` rows of W.cols
//   N.lora_b  GGML shape {rank, out}  a Matrix of W.rows rows of `rank`
// so that the adapted layer is y = W·x + scale·B·(A·x) with scale = alpha / rank (1 when alpha
// is 0 or absent, as llama.cpp does) times the adapter's own scale (default 1).
// Keel adapts the seven projection matrices of each layer (q, k, v, o, gate, up, down); every
// pair must have the same rank. A/B tensors may be F32, F16 or BF16 (widened to F32 at load:
// the low-rank products run in F32, as if the delta were merged into F32 weights).
//
// Invariants after load(): every LoraPair matrix is F32 in the row layout and points into the
// owned GgufFile's bytes or the adapter's own widened copy; the
// adapter is immutable and may be shared by any number of threads and Contexts, as long as it
// outlives the passes that use it (the engine holds it by shared_ptr per request).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "gguf/reader.h"
#include "kernels/kernels.h"
#include "model/model.h"

namespace keel::model {

// The projections of a layer an adapter may target, in LayerWeights order.
enum class LoraTarget : uint8_t { kQ = 0, kK, kV, kO, kGate, kUp, kDown };
inline constexpr size_t kNumLoraTargets = 7;

// "q", "k", "v", "o", "gate", "up", "down".
std::string_view lora_target_name(LoraTarget t);
std::optional<LoraTarget> lora_target_from_name(std::string_view name);
// The base tensor a target names in layer `il`: "blk.<il>.attn_q.weight", ...
std::string lora_base_tensor_name(LoraTarget t, int64_t il);

// One adapted matrix: delta(x) = B·(A·x).
struct LoraPair {
  kernels::Matrix a;  // [rank][in]
  kernels::Matrix b;  // [out][rank]
};

// Per layer: the adapted matrices (nullopt = not adapted), indexed by LoraTarget.
using LoraLayer = std::array<std::optional<LoraPair>, kNumLoraTargets>;

class LoraAdapter {
 public:
  // Opens `path` (read into memory) and validates it against `base`. Errors name the file and,
  // where one is at fault, the tensor: InvalidArgument (not a LoRA adapter, another
  // architecture, an unknown or unpaired tensor, a tensor that names no adaptable base matrix,
  // wrong shapes, ranks that differ, no tensors at all), Unsupported (a tensor type other than
  // F32/F16/BF16); the file system's and GGUF parser's errors as they come.
  // `scale`: the adapter's own multiplier (llama.cpp's --lora-scaled), finite.
  static Result<std::unique_ptr<LoraAdapter>> open(const std::string& path, const Model& base,
                                                   float scale = 1.0f);
  // As above from a file already parsed (DataMode::kRead or kMmap).
  static Result<std::unique_ptr<LoraAdapter>> load(gguf::GgufFile file, const Model& base,
                                                   float scale = 1.0f);

  LoraAdapter(const LoraAdapter&) = delete;
  LoraAdapter& operator=(const LoraAdapter&) = delete;

  [[nodiscard]] const std::string& path() const { return file_.path(); }
  [[nodiscard]] int64_t rank() const { return rank_; }
  [[nodiscard]] float alpha() const { return alpha_; }  // 0 when absent
  // The multiplier of B·A: scale · alpha / rank (scale alone when alpha is 0).
  [[nodiscard]] float effective_scale() const { return effective_scale_; }
  [[nodiscard]] const std::vector<LoraLayer>& layers() const { return layers_; }  // [n_layer]
  // The targets adapted in at least one layer, as names ("q,k,v").
  [[nodiscard]] std::string targets_string() const;
  // A digest of what the adapter computes: every pair's tensor names, types, shapes and bytes and
  // the effective scale (two adapters with the same digest give the same outputs). 16 bytes as
  // two words; the engine folds it into its prefix-cache keys.
  [[nodiscard]] std::array<uint64_t, 2> content_digest() const { return digest_; }
  // Adapter bytes held (the A/B tensors).
  [[nodiscard]] size_t num_bytes() const { return num_bytes_; }

 private:
  explicit LoraAdapter(gguf::GgufFile file) : file_(std::move(file)) {}
  Status validate_header(const Model& base) const;
  Status bind_tensors(const Model& base);

  gguf::GgufFile file_;
  int64_t rank_ = 0;
  float alpha_ = 0.0f;
  float effective_scale_ = 1.0f;
  std::vector<LoraLayer> layers_;
  std::vector<std::vector<float>> widened_;  // F16/BF16 tensors as F32 (the views point here)
  std::array<uint64_t, 2> digest_{};
  size_t num_bytes_ = 0;
};

}  // namespace keel::model
