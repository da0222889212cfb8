// ProgressReporter: terminal bar with \r redraws, or decile log lines when not a terminal.
#include "host/progress_reporter.h"

#include <unistd.h>

namespace keel::host {

std::string human_amount(uint64_t v, const std::string& unit) {
  if (unit != "B") return std::to_string(v);
  const char* suffix[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double x = static_cast<double>(v);
  int i = 0;
  while (x >= 1024.0 && i < 4) {
    x /= 1024.0;
    ++i;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", x, suffix[i]);
  return buf;
}

ProgressReporter::ProgressReporter(std::string label, std::string unit, bool enabled,
                                   std::FILE* out)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      enabled_(enabled),
      out_(out),
      tty_(::isatty(::fileno(out)) != 0),
      start_(std::chrono::steady_clock::now()) {}

ProgressReporter::~ProgressReporter() { finish(); }

void ProgressReporter::update(uint64_t done, uint64_t total) {
  if (!enabled_ || finished_ || total == 0) return;
  const int percent = static_cast<int>(done * 100 / total);
  if (tty_) {
    if (percent == last_percent_) return;
    last_percent_ = percent;
    constexpr int kWidth = 30;
    const int filled = percent * kWidth / 100;
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(out_, "\r%s [%s] %3d%% (%s / %s)", label_.c_str(), bar.c_str(), percent,
                 human_amount(done, unit_).c_str(), human_amount(total, unit_).c_str());
    std::fflush(out_);
  } else {
    const int decile = percent / 10;
    if (decile == last_decile_) return;
    last_decile_ = decile;
    std::fprintf(out_, "%s: %d%% (%s / %s)\n", label_.c_str(), percent,
                 human_amount(done, unit_).c_str(), human_amount(total, unit_).c_str());
  }
}

void ProgressReporter::finish() {
  if (finished_) return;
  finished_ = true;
  if (enabled_ && tty_ && last_percent_ >= 0) {
    std::fprintf(out_, " %.1fs\n", seconds_since(start_));
  }
}

}  // namespace keel::host
