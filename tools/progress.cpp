// ProgressReporter: terminal bar with \r redraws, or decile log lines when not a terminal.
#include "progress.h"

#include <unistd.h>

#include <cstdio>

namespace keel::cli {
namespace {

std::string human(uint64_t v, const std::string& unit) {
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

}  // namespace

ProgressReporter::ProgressReporter(std::string label, std::string unit, bool enabled)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      enabled_(enabled),
      tty_(::isatty(STDERR_FILENO) != 0),
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
    std::fprintf(stderr, "\r%s [%s] %3d%% (%s / %s)", label_.c_str(), bar.c_str(), percent,
                 human(done, unit_).c_str(), human(total, unit_).c_str());
    std::fflush(stderr);
  } else {
    const int decile = percent / 10;
    if (decile == last_decile_) return;
    last_decile_ = decile;
    std::fprintf(stderr, "%s: %d%% (%s / %s)\n", label_.c_str(), percent,
                 human(done, unit_).c_str(), human(total, unit_).c_str());
  }
}

void ProgressReporter::finish() {
  if (finished_) return;
  finished_ = true;
  if (enabled_ && tty_ && last_percent_ >= 0) {
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::fprintf(stderr, " %.1fs\n", secs);
  }
}

}  // namespace keel::cli
