// Random LoRA adapters for a base model, in llama.cpp's GGUF adapter format (lora_adapter.h):
// what `keel make-lora` writes, for tests and benchmarks. Values are seeded (same spec and base
// shape, same bytes). A ~ N(0, 1/in) and B ~ N(0, (0.3)²/rank) with alpha = rank, so that each
// delta B·A·x is about 0.3× the base projection's output: large enough to change greedy text,
// small enough to keep the model's numerics in range.
//
// Thread safety: pure; call from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "model/lora_adapter.h"
#include "model/model.h"

namespace keel::model {

struct RandomLoraSpec {
  int64_t rank = 16;                // ≥ 1
  std::vector<LoraTarget> targets;  // adapted in every layer; empty = all seven
  DType dtype = DType::kF32;        // of the A/B tensors: F32, F16 or BF16
  uint64_t seed = 1;
  float alpha = 0.0f;  // adapter.lora.alpha; 0 = rank (scale 1)
  float b_std = 0.0f;  // std of B's values; 0 = 0.3 / sqrt(rank)
};

// Parses "q,k,v,o,gate,up,down" (any subset, comma-separated); InvalidArgument names a bad item.
Result<std::vector<LoraTarget>> parse_lora_targets(const std::string& list);

// Writes an adapter for `base` to `path` (atomically). InvalidArgument for a bad spec.
Status write_random_lora(const RandomLoraSpec& spec, const Model& base, const std::string& path);

}  // namespace keel::model
