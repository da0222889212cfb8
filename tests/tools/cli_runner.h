// Runs the keel binary (built in this tree; path compiled in as KEEL_BINARY) as a child process
// and captures its exit code, stdout and stderr, for end-to-end CLI tests.
#pragma once

#include <string>
#include <vector>

namespace keel::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `keel <args...>` with extra environment assignments ("NAME=value").
CliResult run_keel(const std::vector<std::string>& args, const std::vector<std::string>& env = {});

// Number of lines in s (a final line without '\n' counts).
int count_lines(const std::string& s);

}  // namespace keel::testing
