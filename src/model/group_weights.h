// group_weights: the load-time rewrite of a model's quantized matrices into the row-group layout
// (kernels/weight_layout.h) that the decode kernels read in one stream. Done in place in the
// GgufFile's own copy of the tensor bytes (DataMode::kRead), so it costs no memory; the Matrix
// views are marked WeightLayout::kGrouped16. Tensors whose bytes overlap another tensor's (GGUF
// allows aliasing) and types without a grouped form keep the GGUF layout.
//
// Called once by Model::load before the model is shared; not thread-safe with readers.
#pragma once

#include "core/thread_pool.h"
#include "gguf/reader.h"
#include "model/weights.h"

namespace keel::model {

// Rewrites every eligible matrix of `w` (views into `file`); returns how many were rewritten
// (0 when the file's bytes are mapped rather than read). `pool` (optional) splits the work.
int group_weights(gguf::GgufFile& file, Weights& w, ThreadPool* pool = nullptr);

}  // namespace keel::model
