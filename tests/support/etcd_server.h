// EtcdServer: a private etcd for a test — started on two free loopback ports (client and peer)
// with a fresh data directory, ready once GET /health answers, stopped by PID (SIGTERM, then
// SIGKILL after 5 s) when destroyed; it also dies with the test process (PR_SET_PDEATHSIG).
// KEEL_REQUIRE_ETCD() skips a test with the reason printed when no `etcd` binary is on PATH, and
// fails it instead under CI=true (issue 14: CI must run these).
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace keel::testing {

class EtcdServer {
 public:
  // The etcd binary found on PATH ("" when none).
  static std::string find_binary();
  // Starts etcd and waits (up to 20 s) for it to serve; nullptr with `error` set on failure.
  static std::unique_ptr<EtcdServer> start(std::string* error);
  // Starts etcd inside network namespace `netns` (`ip netns exec`), its client URL on
  // http://HOST:2379 and its peer URL on the namespace's loopback; health is checked from a
  // thread that entered the namespace.
  static std::unique_ptr<EtcdServer> start_in_netns(const std::string& netns,
                                                    const std::string& host, std::string* error);
  ~EtcdServer();
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  // "http://127.0.0.1:PORT".
  const std::string& endpoint() const { return endpoint_; }
  int client_port() const { return client_port_; }
  pid_t pid() const { return pid_; }
  // Stops it now (SIGKILL when `hard`): what a dead etcd looks like to clients.
  void stop(bool hard = false);
  // Starts it again on the same ports and data (after stop()); false with `error` set on failure.
  bool restart(std::string* error);

 private:
  EtcdServer() = default;
  bool launch(std::string* error);
  std::vector<std::string> args_;
  pid_t pid_ = -1;
  int client_port_ = 0;
  std::string host_ = "127.0.0.1";
  std::string netns_;  // "" = this process's namespace
  std::string endpoint_;
  std::string data_dir_;
};

// Runs `fn` on a thread that entered network namespace `netns` (/run/netns/NAME); false when it
// could not enter it.
bool run_in_netns(const std::string& netns, const std::function<void()>& fn);

// True when CI=true is set in the environment.
bool under_ci();

}  // namespace keel::testing

#define KEEL_REQUIRE_ETCD()                                                                       \
  do {                                                                                            \
    if (::keel::testing::EtcdServer::find_binary().empty()) {                                     \
      if (::keel::testing::under_ci())                                                            \
        GTEST_FAIL() << "etcd not found on PATH (scripts/install-deps.sh installs etcd-server); " \
                        "required under CI=true";                                                 \
      GTEST_SKIP() << "etcd not found on PATH (scripts/install-deps.sh installs etcd-server); "   \
                      "skipping the etcd test";                                                   \
    }                                                                                             \
  } while (0)
