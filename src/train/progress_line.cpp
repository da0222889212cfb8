// format_step_line / format_duration (progress_line.h).
#include "train/progress_line.h"

#include <cmath>
#include <cstdio>

namespace keel::train {

std::string format_duration(double seconds) {
  const auto s = static_cast<long long>(std::llround(std::max(0.0, seconds)));
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", s / 3600, (s / 60) % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%llds", s);
  }
  return buf;
}

std::string format_step_line(const StepReport& r, int32_t epochs) {
  const double tok_s = r.elapsed_s > 0 ? static_cast<double>(r.trained_tokens) / r.elapsed_s : 0;
  const double eta = r.step > 0 ? r.elapsed_s / static_cast<double>(r.step) *
                                      static_cast<double>(r.total_steps - r.step)
                                : 0.0;
  char buf[192];
  std::snprintf(buf, sizeof(buf),
                "step %lld/%lld · epoch %d/%d · loss %.4f · lr %.1e · %.0f tok/s · ETA %s",
                static_cast<long long>(r.step), static_cast<long long>(r.total_steps), r.epoch,
                epochs, r.loss, r.learning_rate, tok_s, format_duration(eta).c_str());
  return buf;
}

}  // namespace keel::train
