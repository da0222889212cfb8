// init_logging: one stderr sink, "[time] [level] message".
#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace keel {

void init_logging(LogLevel level) {
  auto logger = spdlog::stderr_color_mt("keel");
  logger->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  switch (level) {
    case LogLevel::kDebug:
      logger->set_level(spdlog::level::debug);
      break;
    case LogLevel::kInfo:
      logger->set_level(spdlog::level::info);
      break;
    case LogLevel::kWarn:
      logger->set_level(spdlog::level::warn);
      break;
    case LogLevel::kError:
      logger->set_level(spdlog::level::err);
      break;
    case LogLevel::kOff:
      logger->set_level(spdlog::level::off);
      break;
  }
  spdlog::set_default_logger(logger);
}

}  // namespace keel
