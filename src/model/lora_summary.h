// LoraSummary: what a LoRA adapter file is, read without a base model — for the processes that
// list or route adapters but never run them (the cluster's gateway and job executors). Only the
// header is checked (general.type, adapter.type) and the tensors paired by name; the checks
// against the base model stay LoraAdapter::open's (the task executors').
//
// lora_content_digest is the one definition of an adapter's content digest: LoraAdapter uses it
// too, so for a valid adapter summarize_lora(path).content_digest equals the engine's
// LoraAdapter::content_digest() and a router's prefix keys (engine::lora_prefix_key) equal the
// keys of the engine's cache events.
// Thread safety: pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/result.h"
#include "gguf/reader.h"

namespace keel::model {

struct LoraSummary {
  std::string path;
  int64_t rank = 0;              // the rank of the first pair (LoraAdapter checks they agree)
  float effective_scale = 1.0f;  // scale · alpha / rank (scale alone when alpha is 0 or absent)
  std::string targets;           // adapted projections in LoraTarget order, e.g. "q,k,v,o"
  std::array<uint64_t, 2> content_digest{};
};

// Reads `path` (a GGUF adapter with its data). Errors: the GGUF parser's and file system's;
// InvalidArgument for a file that is not a LoRA adapter, a non-finite scale or alpha, a tensor
// that is neither .lora_a nor .lora_b, an unpaired one, no tensors at all.
Result<LoraSummary> summarize_lora(const std::string& path, float scale = 1.0f);

// The digest of the adapter's A/B tensors — per pair in base-name order, lora_a then lora_b: name,
// type, shape and bytes — mixed with the effective scale they are applied with.
[[nodiscard]] std::array<uint64_t, 2> lora_content_digest(const gguf::GgufFile& file,
                                                          float effective_scale);

}  // namespace keel::model
