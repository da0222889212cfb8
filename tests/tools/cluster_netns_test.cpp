// Many hosts on one machine: three network namespaces ("hosts") joined by veth pairs to a bridge
// that this test makes (private 10.x addresses, no address on the bridge, nothing routed out),
// etcd in host 1, a node agent per host (host 1's reports one core: no room for a two-thread TE),
// and `keel cluster up --nodes auto` in host 1 — its gateway and JE there, its two TEs placed by
// the agents on hosts 2 and 3. A request is served across hosts; then, under non-streamed load,
// host 3 is cut off (its veth down): its TE's and agent's leases expire within the TTL (3 s), the
// JE drops the TE from its fleet and re-drives its jobs (the JE's stall timeout is set far above
// the TTL, so the membership is what moves them), and no client sees an error.
//
// Needs root, `ip` and etcd: without them the test prints why and is skipped (failed under
// CI=true). Names carry this process's pid; everything made is removed on every path (the
// fixture's TearDown, and the supervisor's destructor stops each process by pid).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "cluster/process_supervisor.h"
#include "cluster/ready_line.h"
#include "support/etcd_server.h"

namespace keel::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kTtlS = 3;

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return "popen failed";
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  return rc == 0 ? out : "FAILED(" + std::to_string(rc) + "): " + out;
}

bool failed(const std::string& out) { return out.rfind("FAILED(", 0) == 0; }

// One HTTP/1.1 request to host:port from inside `netns`; {status, body}; status 0 on a transport
// failure.
std::pair<int, std::string> http(const std::string& netns, const std::string& host, int port,
                                 const std::string& method, const std::string& target,
                                 const std::string& body = "") {
  std::pair<int, std::string> out{0, ""};
  run_in_netns(netns, [&] {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{60, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      ::close(fd);
      out.second = "connect failed";
      return;
    }
    const std::string req =
        method + " " + target + " HTTP/1.1\r\nHost: " + host +
        "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\nConnection: close\r\n\r\n" + body;
    ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    std::string raw;
    char buf[16384];
    ssize_t n = 0;
    while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) raw.append(buf, static_cast<size_t>(n));
    ::close(fd);
    if (raw.rfind("HTTP/1.1 ", 0) == 0) out.first = std::atoi(raw.c_str() + 9);
    const size_t end = raw.find("\r\n\r\n");
    out.second = end == std::string::npos ? raw : raw.substr(end + 4);
  });
  return out;
}

class ClusterNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (::geteuid() != 0) why = "not root (network namespaces need CAP_NET_ADMIN)";
    if (why.empty() && failed(run("command -v ip"))) why = "no `ip` (iproute2)";
    if (why.empty() && EtcdServer::find_binary().empty()) why = "etcd not found on PATH";
    if (why.empty() && failed(run("command -v etcdctl"))) why = "etcdctl not found";
    const std::string tag = std::to_string(::getpid() % 100000);
    subnet_ = "10.213." + std::to_string(::getpid() % 250) + ".";
    bridge_ = "kb" + tag;
    for (int i = 1; i <= 3; ++i) {
      ns_.push_back("keel-" + tag + "-h" + std::to_string(i));
      veth_.push_back("kv" + tag + "h" + std::to_string(i));
    }
    if (why.empty()) {
      const std::string probe = run("ip netns add " + ns_[0]);
      made_ = true;
      if (failed(probe)) why = "`ip netns add` failed: " + probe;
    }
    if (!why.empty()) {
      if (under_ci()) GTEST_FAIL() << why << "; required under CI=true";
      GTEST_SKIP() << why;
    }
    ASSERT_NO_FATAL_FAILURE(build_topology());
  }

  void TearDown() override {
    if (made_ && veth_.size() == 3) run("ip link set " + veth_[2] + " up");  // let h3 leave cleanly
    sup_.reset();  // every process, by pid, before the namespaces go
    etcd_.reset();
    if (!made_) return;
    for (const std::string& ns : ns_) run("ip netns del " + ns);
    for (const std::string& v : veth_) run("ip link del " + v);
    run("ip link del " + bridge_);
  }

  void sh(const std::string& cmd) {
    const std::string out = run(cmd);
    ASSERT_FALSE(failed(out)) << cmd << ": " << out;
  }

  void build_topology() {
    sh("ip link add " + bridge_ + " type bridge");
    sh("ip link set " + bridge_ + " up");
    for (size_t i = 0; i < 3; ++i) {
      const std::string peer = "kp" + veth_[i].substr(2);
      if (i > 0) sh("ip netns add " + ns_[i]);
      sh("ip link add " + veth_[i] + " type veth peer name " + peer);
      sh("ip link set " + peer + " netns " + ns_[i]);
      sh("ip link set " + veth_[i] + " master " + bridge_ + " up");
      const std::string in = "ip netns exec " + ns_[i] + " ";
      sh(in + "ip link set lo up");
      sh(in + "ip addr add " + addr(i) + "/24 dev " + peer);
      sh(in + "ip link set " + peer + " up");
    }
  }

  std::string addr(size_t host) const { return subnet_ + std::to_string(host + 1); }

  std::vector<std::string> membership() const {
    return {"--membership",        "etcd",     "--etcd-endpoints", etcd_->endpoint(),
            "--membership-prefix", "/keel/ns", "--membership-ttl", std::to_string(kTtlS)};
  }

  Result<cluster::Child> spawn(const std::string& name, size_t host, std::vector<std::string> args,
                               int timeout_s) {
    cluster::ChildSpec spec;
    spec.name = name;
    spec.argv = {"ip", "netns", "exec", ns_[host], KEEL_BINARY};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    const std::vector<std::string> m = membership();
    spec.argv.insert(spec.argv.end(), m.begin(), m.end());
    spec.ready_timeout = std::chrono::seconds(timeout_s);
    return sup_->spawn(spec);
  }

  // The te members in etcd ("id address" lines), read from host 1.
  std::string te_members() const {
    return run("ip netns exec " + ns_[0] +
               " env ETCDCTL_API=3 etcdctl --dial-timeout=2s --command-timeout=3s --endpoints=" +
               etcd_->endpoint() + " get --prefix --print-value-only /keel/ns/members/te/");
  }

  std::string subnet_, bridge_;
  std::vector<std::string> ns_, veth_;
  bool made_ = false;
  std::unique_ptr<EtcdServer> etcd_;
  std::unique_ptr<cluster::ProcessSupervisor> sup_ = std::make_unique<cluster::ProcessSupervisor>();
};

TEST_F(ClusterNetnsTest, CrossHostRequestAndHostCutOff) {
  const auto t0 = Clock::now();
  std::string error;
  etcd_ = EtcdServer::start_in_netns(ns_[0], addr(0), &error);
  ASSERT_NE(etcd_, nullptr) << error;
  for (size_t h = 0; h < 3; ++h) {
    // Host 1 reports one core: no room for a TE of two threads (placement.h).
    std::vector<std::string> args = {
        "node-agent",       "--host-id",    "h" + std::to_string(h + 1),
        "--listen",         addr(h) + ":0", "--cores",
        h == 0 ? "1" : "2", "--max-tes",    "1"};
    Result<cluster::Child> agent = spawn("agent-h" + std::to_string(h + 1), h, args, 20);
    ASSERT_TRUE(agent.ok()) << agent.status().to_string();
  }
  Result<cluster::Child> up = spawn("cluster", 0,
                                    {"cluster",
                                     "up",
                                     "-m",
                                     KEEL_REPO_STORIES,
                                     "--served-model-name",
                                     "stories",
                                     "--nodes",
                                     "auto",
                                     "--colocated",
                                     "2",
                                     "--jes",
                                     "1",
                                     "--threads-per-te",
                                     "2",
                                     "--host",
                                     addr(0),
                                     "--port",
                                     "0",
                                     "--drain-timeout",
                                     "2",
                                     "--stall-timeout-ms",
                                     "30000",
                                     "--start-timeout",
                                     "60"},
                                    90);
  ASSERT_TRUE(up.ok()) << up.status().to_string();
  Result<int> port = cluster::ready_port(up->ready);
  ASSERT_TRUE(port.ok());
  const double start_s = std::chrono::duration<double>(Clock::now() - t0).count();

  // Both TEs run on the other hosts, and a request is served across them.
  const std::string tes = te_members();
  EXPECT_NE(tes.find(addr(1) + ":"), std::string::npos) << tes;
  EXPECT_NE(tes.find(addr(2) + ":"), std::string::npos) << tes;
  EXPECT_EQ(tes.find(addr(0) + ":"), std::string::npos) << tes;
  const nlohmann::json req = {{"prompt", "Once upon a time"},
                              {"max_tokens", 200},
                              {"ignore_eos", true},
                              {"temperature", 0}};
  auto r = http(ns_[0], addr(0), *port, "POST", "/v1/completions", req.dump());
  ASSERT_EQ(r.first, 200) << r.second;

  // Non-streamed load from 4 clients; host 3 is cut off while it runs.
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, errors{0};
  std::string first_error;
  std::mutex mu;
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      while (!stop) {
        auto res = http(ns_[0], addr(0), *port, "POST", "/v1/completions", req.dump());
        if (res.first == 200) {
          ++ok;
        } else {
          ++errors;
          std::lock_guard lock(mu);
          if (first_error.empty()) first_error = std::to_string(res.first) + " " + res.second;
        }
      }
    });
  }
  std::this_thread::sleep_for(1500ms);
  const int ok_before_cut = ok.load();
  const auto cut = Clock::now();
  sh("ip link set " + veth_[2] + " down");
  double gone_s = -1;
  while (Clock::now() - cut < std::chrono::seconds(kTtlS + 5)) {
    if (te_members().find(addr(2) + ":") == std::string::npos) {
      gone_s = std::chrono::duration<double>(Clock::now() - cut).count();
      break;
    }
    std::this_thread::sleep_for(100ms);
  }
  std::this_thread::sleep_for(2s);  // the load goes on on host 2 alone
  stop = true;
  for (std::thread& t : clients) t.join();

  const auto metrics = http(ns_[0], addr(0), *port, "GET", "/metrics");
  int64_t redriven = -1;
  const size_t at = metrics.second.find("\nkeel:cluster_jobs_redriven_total");
  if (at != std::string::npos) {
    redriven = std::atoll(metrics.second.c_str() + metrics.second.find(' ', at + 1) + 1);
  }
  std::printf(
      "netns: cluster up in %.1f s; host 3's TE left etcd %.2f s after its veth went down "
      "(TTL %d s); %d requests ok (%d before the cut), %d errors; %lld jobs re-driven\n",
      start_s, gone_s, kTtlS, ok.load(), ok_before_cut, errors.load(),
      static_cast<long long>(redriven));
  EXPECT_GE(gone_s, 0) << "host 3's TE still registered " << kTtlS + 5 << " s after the cut";
  EXPECT_LE(gone_s, kTtlS + 1.0);
  EXPECT_EQ(errors.load(), 0) << first_error;
  EXPECT_GT(ok.load(), ok_before_cut);  // served after the cut, by host 2
  EXPECT_GE(redriven, 1) << "no job was re-driven off host 3";
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 60.0);
}

}  // namespace
}  // namespace keel::testing
