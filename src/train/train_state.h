// TrainState: where a fine-tuning run stands between two optimizer steps — the LoRA parameters,
// AdamW's moments and step count, the data cursor (the epoch in progress and the position in that
// epoch's seeded order of the examples) and the epoch's running loss. A run resumed from it takes
// the same steps with the same losses and the same bits as one that never stopped: the examples'
// order is a pure function of (seed, epoch), so the seed is the whole of the random state, and
// every reduction runs in a fixed order (finetune.h).
//
// encode/decode: a little-endian binary form ("KEELFTS1", a version, the fields, then params,
// first and second moments as F32) — what a paused or checkpointed job keeps on disk.
// Thread safety: plain data and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace keel::train {

struct TrainState {
  // What the run was started with; a resume must match them (finetune() checks).
  uint64_t seed = 0;
  int32_t epochs = 0;
  int32_t batch_size = 0;
  int64_t num_examples = 0;
  // Progress.
  int64_t step = 0;          // optimizer steps taken
  int32_t epoch = 0;         // the epoch in progress, 0-based; == epochs when the run is done
  int64_t next_example = 0;  // index into that epoch's order of the next batch's first example;
                             // == num_examples: the epoch's steps are done, its end is not
  int64_t trained_tokens = 0;
  double epoch_loss_sum = 0.0;  // Σ loss of the epoch's steps so far
  int64_t epoch_targets = 0;    // their trained targets
  std::vector<float> params;    // the LoRA A/B vector [num_params]
  std::vector<float> adam_m;    // AdamW's first moments [num_params]
  std::vector<float> adam_v;    // and second moments
};

std::string encode_train_state(const TrainState& s);
// Corrupt for bytes that are not an encoded state (wrong magic or version, cut short, sizes that
// disagree).
Result<TrainState> decode_train_state(std::string_view bytes);

}  // namespace keel::train
