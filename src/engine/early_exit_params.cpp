// EarlyExitParams::validate.
#include "engine/early_exit_params.h"

#include <cmath>
#include <string>

namespace keel::engine {

Status EarlyExitParams::validate() const {
  if (!std::isfinite(threshold)) {
    return Status::invalid_argument("early_exit.threshold must be a finite number");
  }
  if (layers.size() > static_cast<size_t>(kMaxExitLayer)) {
    return Status::invalid_argument("early_exit.layers lists too many layers");
  }
  for (int32_t l : layers) {
    if (l < 0 || l >= kMaxExitLayer) {
      return Status::invalid_argument("early_exit.layers holds " + std::to_string(l) +
                                      ", outside [0, " + std::to_string(kMaxExitLayer) + ")");
    }
  }
  return Status();
}

}  // namespace keel::engine
