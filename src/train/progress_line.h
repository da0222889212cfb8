// The one-line progress display of a fine-tuning run: step, epoch, loss, learning rate, tokens/s
// and the estimated time left, e.g.
//   "step 120/300 · epoch 2/5 · loss 1.2345 · lr 8.0e-04 · 1520 tok/s · ETA 1m05s"
// Thread safety: pure functions.
#pragma once

#include <string>

#include "train/finetune.h"

namespace keel::train {

// "1m05s", "2h03m", "42s".
std::string format_duration(double seconds);

// The line for `r` of a run with `epochs` epochs (no newline).
std::string format_step_line(const StepReport& r, int32_t epochs);

}  // namespace keel::train
