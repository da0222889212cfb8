// Where a server keeps its state (`--state-dir`) when the flag is not given: one directory per
// listening port under keel's cache directory, so a restarted server on the same port finds its
// files and batches again, while servers on other ports never share (or lock each other out of)
// a directory. A server on an ephemeral port (0) gets a new port each run, so nothing could be
// found again: it keeps its state in memory only ("").
//
// Thread safety: a pure function.
#pragma once

#include <string>
#include <string_view>

namespace keel::state {

// "<cache_dir>/state/port-<port>", or "" when port is 0.
inline std::string default_state_dir(std::string_view cache_dir, int port) {
  if (port == 0) return {};
  return std::string(cache_dir) + "/state/port-" + std::to_string(port);
}

}  // namespace keel::state
