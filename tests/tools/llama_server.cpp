// LlamaServer: fork/exec of the reference llama-server, /health polling, stop by PID.
#include "llama_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

// A port the kernel just gave out on 127.0.0.1 (free now; the usual small race with others).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// Waits up to `ms` for the child to exit; true when it did.
bool reap(pid_t pid, int ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace

std::string llama_server_binary() {
  const std::string path = shared_path("reference/llama.cpp/bin/llama-server");
  return std::filesystem::exists(path) ? path : "";
}

LlamaServer::LlamaServer(const std::string& model, int ctx, int timeout_s) {
  const std::string bin = llama_server_binary();
  if (bin.empty()) return;
  log_path_ = make_temp_dir("llama-server") + "/log.txt";
  port_ = free_port();
  std::vector<std::string> args = {bin,
                                   "-m",
                                   model,
                                   "--host",
                                   "127.0.0.1",
                                   "--port",
                                   std::to_string(port_),
                                   "-t",
                                   "1",
                                   "-np",
                                   "1",
                                   "-c",
                                   std::to_string(ctx),
                                   "-lm",
                                   "none",
                                   "-ctk",
                                   "f32",
                                   "-ctv",
                                   "f32",
                                   "-fa",
                                   "off"};
  pid_ = ::fork();
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG,
            SIGKILL);  // a test killed mid-run (SIGPIPE, timeout) leaves no server
    const int out = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(out, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    if (http_request(port_, "GET", "/health").status == 200) {
      ready_ = true;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

LlamaServer::~LlamaServer() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  if (!reap(pid_, 10000)) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

std::string LlamaServer::log() const { return log_path_.empty() ? "" : read_file(log_path_); }

}  // namespace keel::testing
