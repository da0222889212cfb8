// Writing a trained LoRA adapter in llama.cpp's GGUF adapter format — the format keel's
// LoraAdapter reads and `--lora` serves (model/lora_adapter.h), and the one `keel make-lora`
// writes with the same GgufWriter: general.architecture (the base's), general.type = "adapter",
// adapter.type = "lora", adapter.lora.alpha, and per adapted matrix N two F32 tensors
//   N.lora_a  GGML shape {in, rank}   (A: rank rows of `in`)
//   N.lora_b  GGML shape {rank, out}  (B: `out` rows of `rank`)
// in the LoraLayout's slot order, plus keel.finetune.* keys describing the run.
//
// Thread safety: pure; call from any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/result.h"
#include "model/model.h"
#include "train/lora_params.h"

namespace keel::train {

// What the file records about the run that produced it (keel.finetune.*).
struct AdapterProvenance {
  std::string name;            // general.name
  int64_t steps = 0;           // optimizer steps taken
  int64_t trained_tokens = 0;  // tokens through the forward pass, all epochs
  double train_loss = 0.0;     // mean loss of the last step
  uint64_t seed = 0;
};

// Writes `params` (layout.num_params values) as an adapter for `base` to `path`, atomically.
Status write_lora_adapter(const LoraLayout& layout, std::span<const float> params,
                          const model::Model& base, const AdapterProvenance& info,
                          const std::string& path);

}  // namespace keel::train
