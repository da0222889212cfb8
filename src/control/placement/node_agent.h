// NodeAgent: a host's agent (`keel node-agent`, docs/cluster.md "Node agents"). It registers the
// host in the membership (node/<host-id>, its capacity as attributes:
// cluster/policy/node_capacity.h) under its own lease — a host cut off vanishes within the TTL —
// and listens for the cluster manager's start_te / stop_te calls
// (cluster/protocol/node_messages.h). A start binds an idle warm TE of the host's pool (`warm`,
// kept topped up) when one is idle and the model's name allows — the start's engine spec goes with
// the bind and the TE applies it over its own — else starts `keel te --spec -` with the model;
// either way the TE registers itself (te/<id>, its own lease) before the reply, so JEs following
// the membership take it. A start with role "pp-stage" starts `keel pp-stage --spec -` instead (a
// pipelined TE's stage 1, placed in its gang by the manager: it listens on the agent's host,
// registers nothing, and exits when its stage 0's link closes); one with role "ep-expert" starts
// `keel ep-expert --spec - --exit-with-leader` (an expert-parallel TE's member, placed in its gang:
// it listens over UCX on the agent's host, registers nothing, and exits with its leader). Children
// are started and stopped by
// PID (ProcessSupervisor); shutdown() stops every one of them, then revokes the lease. Every call
// carries the manager's fencing token; one lower than the highest this agent has admitted (a stale
// manager's) is refused with FailedPrecondition before it acts (cluster/policy/leader_fence.h).
//
// Threads: run()'s thread owns the supervisor and the warm pool and handles every request; the
// listener's link threads only queue requests (under queue_mu_) and run()'s thread answers them.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cluster/policy/leader_fence.h"
#include "cluster/policy/node_capacity.h"
#include "cluster/protocol/node_messages.h"
#include "control/manager/cluster_membership.h"
#include "control/scaleout/warm_pool.h"
#include "core/mutex.h"
#include "core/result.h"
#include "net/host_port.h"
#include "net/link.h"
#include "net/link_server.h"
#include "proc/process_supervisor.h"

namespace keel::control {

struct NodeAgentConfig {
  MembershipConfig membership;         // etcd is required
  std::string host_id;                 // this host's id in the cluster (its member id)
  std::string listen = "127.0.0.1:0";  // control endpoint HOST:PORT; TEs listen on HOST too
  std::string store_dir;               // the host's model store ("" = none)
  int32_t warm = 0;                    // warm TEs kept idle (`keel te --warm`)
  int32_t max_tes = 0;                 // the most TEs started here (0 = the cores)
  int32_t cores = 0;                   // cores reported (0 = this machine's)
  int64_t memory_bytes = 0;            // memory reported: the smaller of this and MemTotal (0 = it)
  int32_t threads_per_te = 1;          // a warm TE's compute threads
  double start_timeout_s = 120.0;      // a TE's start (fork → ready line)
  std::vector<std::string> keel_command;  // what runs keel (cluster/protocol/executor_launch.h)
  // The model name a TE started from `model_path` serves (a warm TE is bound only when the start
  // asks for no other name); none: the file's stem.
  std::function<std::string(const std::string& model_path)> model_name;
};

class NodeAgent {
 public:
  explicit NodeAgent(NodeAgentConfig config) : o_(std::move(config)) {}
  NodeAgent(const NodeAgent&) = delete;
  NodeAgent& operator=(const NodeAgent&) = delete;

  // Registers the host, starts the listener and fills the warm pool; then prints its ready line.
  Status start();
  // Handles requests until a stop signal; returns it.
  int run(const sigset_t& stop_signals);
  // Stops the listener and every TE it started, then revokes the lease.
  void shutdown();

 private:
  // A request from a link thread, answered on the main thread.
  struct Pending {
    std::shared_ptr<net::Link> link;
    net::Message message;
  };

  // The TEs this agent started and that still run, with what their start_te reserved.
  struct StartedTe {
    pid_t pid = 0;
    std::string address;
    std::string instance;
    int32_t priority = 0;
    int32_t threads = 1;
    int64_t memory_bytes = 0;
    std::string role;
  };

  void on_message(net::Link& link, net::Message m);
  void handle(const Pending& p);
  cluster::StartTeReply start_te(const cluster::StartTe& req);
  // A cold start: `keel te --spec -`, or `keel pp-stage --spec -` for role pp-stage.
  proc::ChildSpec start_child(const cluster::StartTe& req) const;
  Status stop_te(const cluster::StopTe& req);
  // The fence's verdict on a call's token (logged when it refuses or the token rises).
  Status admit(const char* call, const std::string& election, int64_t token);
  // Where the TEs it starts register: the agent's etcd, under their own leases.
  cluster::MembershipSpec te_membership() const;
  // Reads the host's capacity now (cores, /proc/meminfo, store entries, TE counts).
  cluster::NodeCapacity capacity() const;
  // Re-registers node/<host-id> when its capacity attributes changed.
  void publish();

  NodeAgentConfig o_;
  net::HostPort listen_;
  proc::ProcessSupervisor sup_;
  std::unique_ptr<control::WarmPool> pool_;
  std::unique_ptr<net::LinkServer> server_;  // the managers' links
  std::unique_ptr<ClusterMembership> member_;
  std::map<std::string, StartedTe> tes_;  // by id
  std::deque<std::string> stopped_;       // ids stopped on stop_te, the last kMaxStoppedIds
  cluster::LeaderFence fence_;
  std::map<std::string, std::string> published_;
  Mutex queue_mu_;
  std::deque<Pending> queue_ KEEL_GUARDED_BY(queue_mu_);
};

}  // namespace keel::control
