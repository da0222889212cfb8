// NetnsHostsTest: the fixture of the multi-host tests — three network namespaces ("hosts")
// `keel-<pid>-h1..h3`, each with a veth pair whose other end is on a bridge `kb<pid>` this fixture
// makes (private 10.213.x.1-3/24 addresses, no address on the bridge, nothing routed out); keel
// processes spawned inside a host with the etcd membership flags, each stopped by PID.
//
// Needs root, `ip`, etcd and etcdctl: without them SetUp prints why and skips (fails under
// CI=true). Every path removes what it made: TearDown sets every veth up again (so cut-off hosts'
// processes can leave cleanly), stops the processes by PID, then deletes the namespaces, veths and
// bridge by the names it gave them.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "proc/process_supervisor.h"
#include "support/etcd_server.h"

namespace keel::testing {

inline constexpr int kNetnsTtlS = 3;  // the lease TTL of every process in these tests

// `cmd` through the shell (stderr folded in): its output, or "FAILED(rc): output".
std::string run_shell(const std::string& cmd);
bool shell_failed(const std::string& out);

// One HTTP/1.1 request to host:port from inside `netns`: {status, body}; status 0 on a transport
// failure. `timeout_s` bounds each receive.
std::pair<int, std::string> netns_http(const std::string& netns, const std::string& host, int port,
                                       const std::string& method, const std::string& target,
                                       const std::string& body = "", int timeout_s = 60);

// The value of the first `name` sample in Prometheus text (-1 when absent).
double metric_value(const std::string& text, const std::string& name);

class NetnsHostsTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Runs `cmd`; a failure fails the test (ASSERT).
  void sh(const std::string& cmd);
  // Host `h`'s (0-based) address and namespace.
  std::string addr(size_t h) const { return subnet_ + std::to_string(h + 1); }
  const std::string& ns(size_t h) const { return ns_[h]; }
  // Sets host `h`'s veth down (cut off) or up.
  void set_link(size_t h, bool up);

  // Starts etcd in host `h`.
  void start_etcd(size_t h);
  // `keel <args> <membership flags>` in host `h`, ready within `timeout_s`.
  Result<proc::Child> spawn(const std::string& name, size_t h, std::vector<std::string> args,
                            int timeout_s);
  // A node agent in host `h` with `cores` cores and room for one TE.
  void start_agent(size_t h, int cores);
  // `keel cluster up --nodes auto` (model stories, one JE, two-thread TEs) in host `h` with its
  // gateway on the host's address, plus `extra` flags: the gateway's port. *ready (optional):
  // its ready line.
  Result<int> start_cluster(const std::string& name, size_t h,
                            const std::vector<std::string>& extra, nlohmann::json* ready = nullptr);
  // `etcdctl get --prefix --print-value-only <key>` from etcd's host.
  std::string etcd_get(const std::string& key) const;
  // The te members in etcd ("id address" JSON values).
  std::string te_members() const { return etcd_get("/keel/ns/members/te/"); }

  std::unique_ptr<EtcdServer> etcd_;
  std::unique_ptr<proc::ProcessSupervisor> sup_ = std::make_unique<proc::ProcessSupervisor>();

 private:
  std::vector<std::string> membership() const;
  void build_topology();

  std::string subnet_, bridge_;
  std::vector<std::string> ns_, veth_;
  size_t etcd_host_ = 0;
  bool made_ = false;
};

}  // namespace keel::testing
