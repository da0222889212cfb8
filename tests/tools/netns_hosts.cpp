// NetnsHostsTest; see netns_hosts.h.
#include "netns_hosts.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "proc/ready_line.h"

namespace keel::testing {

std::string run_shell(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return "popen failed";
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  return rc == 0 ? out : "FAILED(" + std::to_string(rc) + "): " + out;
}

bool shell_failed(const std::string& out) { return out.rfind("FAILED(", 0) == 0; }

std::pair<int, std::string> netns_http(const std::string& netns, const std::string& host, int port,
                                       const std::string& method, const std::string& target,
                                       const std::string& body, int timeout_s) {
  std::pair<int, std::string> out{0, ""};
  run_in_netns(netns, [&] {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{timeout_s, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
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

double metric_value(const std::string& text, const std::string& name) {
  size_t at = 0;
  while ((at = text.find(name, at)) != std::string::npos) {
    size_t pos = at + name.size();
    const bool line_start = at == 0 || text[at - 1] == '\n';
    if (line_start && pos < text.size() && text[pos] == '{') pos = text.find('}', pos) + 1;
    if (line_start && pos < text.size() && text[pos] == ' ') return std::atof(text.c_str() + pos);
    at += name.size();
  }
  return -1;
}

void NetnsHostsTest::SetUp() {
  std::string why;
  if (::geteuid() != 0) why = "not root (network namespaces need CAP_NET_ADMIN)";
  if (why.empty() && shell_failed(run_shell("command -v ip"))) why = "no `ip` (iproute2)";
  if (why.empty() && EtcdServer::find_binary().empty()) why = "etcd not found on PATH";
  if (why.empty() && shell_failed(run_shell("command -v etcdctl"))) why = "etcdctl not found";
  const std::string tag = std::to_string(::getpid() % 100000);
  subnet_ = "10.213." + std::to_string(::getpid() % 250) + ".";
  bridge_ = "kb" + tag;
  for (int i = 1; i <= 3; ++i) {
    ns_.push_back("keel-" + tag + "-h" + std::to_string(i));
    veth_.push_back("kv" + tag + "h" + std::to_string(i));
  }
  if (why.empty()) {
    const std::string probe = run_shell("ip netns add " + ns_[0]);
    made_ = true;
    if (shell_failed(probe)) why = "`ip netns add` failed: " + probe;
  }
  if (!why.empty()) {
    if (under_ci()) GTEST_FAIL() << why << "; required under CI=true";
    GTEST_SKIP() << why;
  }
  ASSERT_NO_FATAL_FAILURE(build_topology());
}

void NetnsHostsTest::TearDown() {
  if (made_) {
    for (const std::string& v : veth_) run_shell("ip link set " + v + " up");  // let them leave
  }
  sup_.reset();  // every process, by pid, before the namespaces go
  etcd_.reset();
  if (!made_) return;
  for (const std::string& n : ns_) run_shell("ip netns del " + n);
  for (const std::string& v : veth_) run_shell("ip link del " + v);
  run_shell("ip link del " + bridge_);
}

void NetnsHostsTest::sh(const std::string& cmd) {
  const std::string out = run_shell(cmd);
  ASSERT_FALSE(shell_failed(out)) << cmd << ": " << out;
}

void NetnsHostsTest::build_topology() {
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

void NetnsHostsTest::set_link(size_t h, bool up) {
  sh("ip link set " + veth_[h] + (up ? " up" : " down"));
}

void NetnsHostsTest::start_etcd(size_t h) {
  std::string error;
  etcd_ = EtcdServer::start_in_netns(ns_[h], addr(h), &error);
  ASSERT_NE(etcd_, nullptr) << error;
  etcd_host_ = h;
}

std::vector<std::string> NetnsHostsTest::membership() const {
  return {"--membership",        "etcd",     "--etcd-endpoints", etcd_->endpoint(),
          "--membership-prefix", "/keel/ns", "--membership-ttl", std::to_string(kNetnsTtlS)};
}

Result<proc::Child> NetnsHostsTest::spawn(const std::string& name, size_t h,
                                          std::vector<std::string> args, int timeout_s) {
  proc::ChildSpec spec;
  spec.name = name;
  spec.argv = {"ip", "netns", "exec", ns_[h], KEEL_BINARY};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  const std::vector<std::string> m = membership();
  spec.argv.insert(spec.argv.end(), m.begin(), m.end());
  spec.ready_timeout = std::chrono::seconds(timeout_s);
  return sup_->spawn(spec);
}

void NetnsHostsTest::start_agent(size_t h, int cores) {
  const std::string id = "h" + std::to_string(h + 1);
  Result<proc::Child> agent = spawn("agent-" + id, h,
                                    {"node-agent", "--host-id", id, "--listen", addr(h) + ":0",
                                     "--cores", std::to_string(cores), "--max-tes", "1"},
                                    20);
  ASSERT_TRUE(agent.ok()) << agent.status().to_string();
}

Result<int> NetnsHostsTest::start_cluster(const std::string& name, size_t h,
                                          const std::vector<std::string>& extra,
                                          nlohmann::json* ready) {
  std::vector<std::string> args = {"cluster",
                                   "up",
                                   "-m",
                                   KEEL_REPO_STORIES,
                                   "--served-model-name",
                                   "stories",
                                   "--nodes",
                                   "auto",
                                   "--jes",
                                   "1",
                                   "--threads-per-te",
                                   "2",
                                   "--host",
                                   addr(h),
                                   "--port",
                                   "0",
                                   "--drain-timeout",
                                   "2",
                                   "--start-timeout",
                                   "60"};
  args.insert(args.end(), extra.begin(), extra.end());
  KEEL_ASSIGN_OR_RETURN(proc::Child up, spawn(name, h, args, 90));
  if (ready != nullptr) *ready = up.ready;
  return proc::ready_port(up.ready);
}

std::string NetnsHostsTest::etcd_get(const std::string& key) const {
  return run_shell(
      "ip netns exec " + ns_[etcd_host_] +
      " env ETCDCTL_API=3 etcdctl --dial-timeout=2s --command-timeout=3s --endpoints=" +
      etcd_->endpoint() + " get --prefix --print-value-only " + key);
}

}  // namespace keel::testing
