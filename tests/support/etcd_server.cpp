// EtcdServer; see etcd_server.h.
#include "support/etcd_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

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

// GET /health on host:port answers with "true" in its body.
bool healthy(const std::string& host, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  a.sin_port = htons(static_cast<uint16_t>(port));
  std::string got;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    const std::string req = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      char buf[2048];
      ssize_t n = 0;
      while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) got.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return got.find("\"health\":\"true\"") != std::string::npos;
}

}  // namespace

bool run_in_netns(const std::string& netns, const std::function<void()>& fn) {
  bool entered = false;
  std::thread t([&] {
    const int fd = ::open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    entered = ::setns(fd, CLONE_NEWNET) == 0;
    ::close(fd);
    if (entered) fn();
  });
  t.join();
  return entered;
}

bool under_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

std::string EtcdServer::find_binary() {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string candidate = dirs.substr(start, end - start) + "/etcd";
    if (end > start && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

std::unique_ptr<EtcdServer> EtcdServer::start(std::string* error) {
  const std::string bin = find_binary();
  if (bin.empty()) {
    *error = "etcd not found on PATH";
    return nullptr;
  }
  std::unique_ptr<EtcdServer> s(new EtcdServer());
  s->data_dir_ = make_temp_dir("etcd");
  s->client_port_ = free_port();
  const int peer_port = free_port();
  const std::string client = "http://127.0.0.1:" + std::to_string(s->client_port_);
  const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port);
  s->endpoint_ = client;
  s->args_ = {bin,
              "--name",
              "keel-test",
              "--data-dir",
              s->data_dir_ + "/data",
              "--listen-client-urls",
              client,
              "--advertise-client-urls",
              client,
              "--listen-peer-urls",
              peer,
              "--initial-advertise-peer-urls",
              peer,
              "--initial-cluster",
              "keel-test=" + peer};
  if (!s->launch(error)) return nullptr;  // the destructor stops it
  return s;
}

std::unique_ptr<EtcdServer> EtcdServer::start_in_netns(const std::string& netns,
                                                       const std::string& host,
                                                       std::string* error) {
  const std::string bin = find_binary();
  if (bin.empty()) {
    *error = "etcd not found on PATH";
    return nullptr;
  }
  std::unique_ptr<EtcdServer> s(new EtcdServer());
  s->data_dir_ = make_temp_dir("etcd");
  s->client_port_ = 2379;  // a fresh namespace: its ports are free
  s->host_ = host;
  s->netns_ = netns;
  const std::string client = "http://" + host + ":2379";
  const std::string peer = "http://127.0.0.1:2380";
  s->endpoint_ = client;
  s->args_ = {"ip",
              "netns",
              "exec",
              netns,
              bin,
              "--name",
              "keel-test",
              "--data-dir",
              s->data_dir_ + "/data",
              "--listen-client-urls",
              client,
              "--advertise-client-urls",
              client,
              "--listen-peer-urls",
              peer,
              "--initial-advertise-peer-urls",
              peer,
              "--initial-cluster",
              "keel-test=" + peer};
  if (!s->launch(error)) return nullptr;
  return s;
}

bool EtcdServer::restart(std::string* error) {
  stop();
  return launch(error);
}

bool EtcdServer::launch(std::string* error) {
  const std::string log_path = data_dir_ + "/etcd.log";
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(log, 1);
    ::dup2(log, 2);
    std::vector<char*> argv;
    for (const std::string& a : args_) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(args_[0].c_str(), argv.data());
    ::_exit(127);
  }
  if (pid < 0) {
    *error = "fork failed";
    return false;
  }
  pid_ = pid;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    bool ok = false;
    if (netns_.empty()) {
      ok = healthy(host_, client_port_);
    } else {
      run_in_netns(netns_, [&] { ok = healthy(host_, client_port_); });
    }
    if (ok) return true;
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      pid_ = -1;
      *error = "etcd exited at start (status " + std::to_string(status) + "); log in " + log_path;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  *error = "etcd did not become healthy within 20 s; log in " + log_path;
  return false;
}

void EtcdServer::stop(bool hard) {
  if (pid_ <= 0) return;
  ::kill(pid_, hard ? SIGKILL : SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
}

EtcdServer::~EtcdServer() {
  stop();
  std::error_code ec;
  std::filesystem::remove_all(data_dir_, ec);
}

}  // namespace keel::testing
