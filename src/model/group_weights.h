// group_weights: the load-time rewrite of a model's quantized matrices into the row-group layout
// (kernels/weight_layout.h) that the decode kernels read in one stream. Done in place in the
// GgufFile's own copy of the tensor bytes (DataMode::kRead), so it costs no memory; the Matrix
// views are marked WeightLayout::kGrouped16. Only the bytes the views cover are rewritten (a whole
// tensor, or each run of expert slices), so an expert shard's emptied, unread experts
// (model/expert_shard.h) stay untouched; empty views are ignored. Tensors whose bytes overlap
// another tensor's (GGUF allows aliasing) and types without a grouped form keep the GGUF layout.
//
// A file may arrive already grouped (a model store entry, store/): it lists the grouped tensors
// under kGroupedTensorsKey, and mark_pregrouped() marks their views without touching the bytes.
//
// Called once by Model::load before the model is shared; not thread-safe with readers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "gguf/reader.h"
#include "model/weights.h"

namespace keel::model {

// Rewrites every eligible matrix of `w` (views into `file`); returns how many were rewritten
// (0 when the file's bytes are mapped rather than read). `pool` (optional) splits the work.
int group_weights(gguf::GgufFile& file, Weights& w, ThreadPool* pool = nullptr);

// Metadata of a file whose tensor bytes are already in the row-group layout: the names of the
// tensors stored as kGrouped16 (an array of strings) and the layout version they were written in.
inline constexpr std::string_view kGroupedTensorsKey = "keel.layout.grouped_tensors";
inline constexpr std::string_view kLayoutVersionKey = "keel.layout.version";
// Bumped whenever kernels/weight_layout.h's kGrouped16 byte order changes.
inline constexpr int64_t kGroupedLayoutVersion = 1;

// Marks as kGrouped16 the views of the tensors `file` lists under kGroupedTensorsKey (nothing
// when the key is absent). Corrupt when the list is not an array of strings, names a tensor no
// matrix views, or kLayoutVersionKey differs from kGroupedLayoutVersion.
Status mark_pregrouped(const gguf::GgufFile& file, Weights& w);

// The names of the tensors whose matrix views are kGrouped16 (what a writer lists under
// kGroupedTensorsKey), in the file's tensor order.
std::vector<std::string> grouped_tensor_names(const gguf::GgufFile& file, const Weights& w);

}  // namespace keel::model
