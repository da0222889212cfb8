// Logging: spdlog's default logger is the process-wide sink, installed by main() through
// init_logging(); library code logs with KEEL_LOG_* (which check the level before formatting, so
// a disabled debug line costs one branch in a hot loop).
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace keel {

enum class LogLevel { kDebug, kInfo, kWarn, kError, kOff };

// Installs a stderr sink with keel's pattern at the given level. Call once from main().
void init_logging(LogLevel level);

}  // namespace keel

#define KEEL_LOG_DEBUG(...)                                                          \
  do {                                                                               \
    if (spdlog::default_logger_raw()->should_log(spdlog::level::debug)) [[unlikely]] \
      spdlog::debug(__VA_ARGS__);                                                    \
  } while (0)
#define KEEL_LOG_INFO(...) spdlog::info(__VA_ARGS__)
#define KEEL_LOG_WARN(...) spdlog::warn(__VA_ARGS__)
#define KEEL_LOG_ERROR(...) spdlog::error(__VA_ARGS__)
