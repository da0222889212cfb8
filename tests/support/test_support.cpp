// Test helpers: shared-data location (compile-time default, overridable by environment).
#include "support/test_support.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#ifndef KEEL_SHARED_DIR_DEFAULT
#define KEEL_SHARED_DIR_DEFAULT "../shared"
#endif
#ifndef KEEL_TEST_TMP_DIR
#define KEEL_TEST_TMP_DIR "/tmp"
#endif

namespace keel::testing {

std::string shared_dir() {
  if (const char* env = std::getenv("KEEL_SHARED_DIR"); env && *env) return env;
  return KEEL_SHARED_DIR_DEFAULT;
}

bool have_shared() { return std::filesystem::is_directory(shared_dir()); }

std::string shared_path(const std::string& relative) { return shared_dir() + "/" + relative; }

std::string make_temp_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  std::filesystem::path p =
      std::filesystem::path(KEEL_TEST_TMP_DIR) /
      (tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace keel::testing
