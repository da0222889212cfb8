// self_exe(): the path of the running keel binary (/proc/self/exe), which the cluster commands
// re-run as their children (TEs, JEs, stages); "keel" (found on PATH) when it cannot be read.
//
// Thread safety: a pure function of the process.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

namespace keel::cli {

inline std::string self_exe() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("keel") : p.string();
}

}  // namespace keel::cli
