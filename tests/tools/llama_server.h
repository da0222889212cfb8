// LlamaServer: the reference llama.cpp server (shared/reference/llama.cpp/bin/llama-server) as a
// child process on a free loopback port, for tests that compare keel with llama.cpp on the same
// GGUF file. Started with 1 thread, 1 slot, `-lm none` (see the reference README), an F32 KV cache
// and flash attention off (keel's test Runner keeps F32 K/V; llama-server's default F16 cache
// alone moves log-probabilities by ~1e-2); ready when
// GET /health answers 200 (bounded wait); stopped by PID (SIGTERM, then SIGKILL) when destroyed,
// and killed by the kernel if the test process dies first (PR_SET_PDEATHSIG).
#pragma once

#include <sys/types.h>

#include <string>

namespace keel::testing {

// The llama-server wrapper under the shared directory ("" when absent).
std::string llama_server_binary();

class LlamaServer {
 public:
  // Starts `llama-server -m model` and waits up to `timeout_s` for /health; check ok().
  explicit LlamaServer(const std::string& model, int ctx = 1024, int timeout_s = 60);
  ~LlamaServer();
  LlamaServer(const LlamaServer&) = delete;
  LlamaServer& operator=(const LlamaServer&) = delete;

  [[nodiscard]] bool ok() const { return ready_; }
  [[nodiscard]] int port() const { return port_; }
  // The error when !ok(): what it printed.
  [[nodiscard]] std::string log() const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  bool ready_ = false;
  std::string log_path_;
};

}  // namespace keel::testing
