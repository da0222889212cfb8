// Helpers shared by keel's tests: where the shared reference data lives, a skip macro for tests
// that need it, scratch directories, and polling for another thread's state.
//
// Shared data (../shared next to the repository, or $KEEL_SHARED_DIR) holds real models and
// vocabularies. When the directory is absent — a user's machine — tests that need it skip with
// one clear line; when it is present, a missing file inside it is a failure, never a skip.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

namespace keel::testing {

// The shared data directory (may not exist).
std::string shared_dir();
// True when shared_dir() exists.
bool have_shared();
// shared_dir() + "/" + relative.
std::string shared_path(const std::string& relative);
// A fresh empty directory under the build tree's temporary folder, unique per call.
std::string make_temp_dir(const std::string& tag);
// Reads a whole file; fails the test (ADD_FAILURE) and returns "" if it cannot.
std::string read_file(const std::string& path);

// Polls pred() every few milliseconds until it holds or `timeout` passes; returns its last value.
// For state another thread reaches (an engine, a server, a transfer thread), never for timing.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return pred();
}

}  // namespace keel::testing

// Skips the current test, with one line naming the missing directory, when shared data is absent.
#define KEEL_REQUIRE_SHARED()                                                                \
  do {                                                                                       \
    if (!::keel::testing::have_shared())                                                     \
      GTEST_SKIP() << "shared reference data not found at " << ::keel::testing::shared_dir() \
                   << " (set KEEL_SHARED_DIR); skipping real-model test";                    \
  } while (0)
