// The cluster's processes as keel subcommands (see docs/cluster.md):
//   keel te       one task executor: a model, an engine and the TE-shell (src/cluster)
//   keel je       one job executor: routes jobs to TEs, re-drives them when a TE dies
//   keel cluster up      the whole tree on one machine — TEs and JEs as child processes, the
//                        gateway (the OpenAI server in front of the fleet) in this process
//   keel cluster status  the fleet as the gateway's JE sees it
//   keel cluster profile-pd  measures the PD heatmap (colocated vs prefill/decode fleets)
// Children print a KEEL_READY line when serving (proc/ready_line.h); every process drains on
// SIGTERM/SIGINT.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/protocol/je_spec.h"
#include "cluster/protocol/te_spec.h"
#include "commands.h"
#include "control/manager/cluster_membership.h"
#include "control/placement/node_agent.h"
#include "control/profile/pd_profile_run.h"
#include "control/scaleout/scale_bench.h"
#include "control/up/up_options.h"

namespace keel::cli {

// keel cluster up's configuration and its parts (control/up/up_options.h).
using KvHandoffFlags = control::KvHandoffOptions;
using PeerTierOptions = control::PeerTierOptions;
using AutoscaleOptions = control::AutoscaleOptions;
using ClusterUpOptions = control::ClusterUpOptions;

// Membership (docs/cluster.md, "Membership (etcd)"): the flags fill control's config.
using MembershipOptions = control::MembershipConfig;

struct TeOptions {
  ServeOptions engine;  // model, engine and compute flags (host/port are the TE's control port)
  std::string id = "te-0";
  std::string role = "colocated";  // colocated | prefill | decode
  KvHandoffFlags handoff;          // a prefill TE's
  PeerTierOptions peer;
  // --warm: start without a model (kernels chosen), print a ready line with "state":"warm" and
  // the bind port, and serve what a bind_model call names (cluster/protocol/bind_model.h); -m is
  // ignored.
  bool warm = false;
  // --store-dir: the model store (store/model_store.h) to map the model from when it holds an
  // entry for it; "" = always read the file. With a store, the TE also runs a weights service
  // (its ready line's "weights_port"): peers fork entries from it, and a bind's fork_from pulls
  // the entry into this store first (cluster/weights/weights_fork.h).
  std::string store_dir;
  std::string weights_fault;  // --weights-fault flip:N | stop:N (tests): the weights service's
  // --advertise-host: the host others reach this TE's control port at, as registered in the
  // membership ("" = --host; needed when --host is 0.0.0.0).
  std::string advertise_host;
  MembershipOptions membership;  // etcd: the TE registers itself (te/<id>) under its own lease
  // --health-port: HTTP GET /health from progress (te_health_endpoint.h; 0 = a free port, shown
  // in the ready line as "health_port"); -1 = none. --health-hang-ms: work held and no engine
  // step for this long is hung (503).
  int health_port = -1;
  int64_t health_hang_ms = 5000;
  // --spec SOURCE: the whole configuration from a TeSpec (cluster/protocol/te_spec.h; "-" = stdin),
  // how cluster up, the warm pool and node agents start TEs; no other flag goes with it.
  std::string spec_source;
};
// Runs the TE of `spec`; its engine is keel serve's from `base` with the spec's engine part
// applied (`base`: the flags, or te_options(spec)).
int run_te(const TeOptions& base, const cluster::TeSpec& spec);

// `keel je`'s flags fill a JE spec (cluster/protocol/je_spec.h) directly, its membership part
// through the membership flags; `--spec SOURCE` reads the whole spec instead ("-" = stdin: how
// cluster up starts JEs; no other flag goes with it). Either way it is checked by the spec's own
// decoder.
struct JeOptions {
  cluster::JeSpec spec;
  MembershipOptions membership;
  std::string spec_source;
};
// Runs the JE of `spec` (its served model name filled in here: a built-in model's name).
int run_je(cluster::JeSpec spec);

// `keel node-agent` (docs/cluster.md, "Node agents"): one per host. It registers the host
// (node/<host-id>) with its capacity under its own lease, starts and stops TEs there when the
// cluster manager asks (start_te / stop_te over a link, cluster/protocol/node_messages.h), and
// keeps the host's warm pool.
using NodeAgentOptions = control::NodeAgentConfig;  // control/placement/node_agent.h
int run_node_agent(const NodeAgentOptions& opts);

int run_cluster_up(const ClusterUpOptions& opts);

struct ClusterStatusOptions {
  std::string url = "http://127.0.0.1:8080";
  bool json = false;
};
int run_cluster_status(const ClusterStatusOptions& opts);

// `keel cluster profile-pd`: its configuration is the run's (-m as named; resolved before the run).
using ClusterProfilePdOptions = control::PdProfileConfig;  // control/profile/pd_profile_run.h
int run_cluster_profile_pd(const ClusterProfilePdOptions& opts);

// `keel cluster scale`: asks a running `keel cluster up --warm-pool N` to bind warm TEs.
struct ClusterScaleOptions {
  std::string control;  // host:port (the gateway's ready line's control_port)
  int32_t tes = 1;
  std::string role = "colocated";  // what the bound TEs compute: colocated | prefill | decode
  bool json = false;
};
int run_cluster_scale(const ClusterScaleOptions& opts);

// `keel cluster preload`: builds (or drops) a model's entry in the host's model store by hand.
struct ClusterPreloadOptions {
  std::string model_path;
  std::string store_dir = "/dev/shm";
  uint64_t store_budget = 0;  // bytes of entries the store may hold (0 = no limit): LRU eviction
  std::string isa;            // the kernel table the entry is for ("" = this CPU's best / KEEL_ISA)
  bool drop = false;          // remove the model's entry instead
  bool list = false;          // list the store's entries
};
int run_cluster_preload(const ClusterPreloadOptions& opts);

// `keel cluster bench-scale`: time to N ready TEs and decision → first token, per scale-out path.
struct ClusterBenchScaleOptions {
  control::ScaleBenchConfig bench;  // control/scaleout/scale_bench.h (-m as named)
  bool json = false;                // print the report as JSON (else as text)
};
int run_cluster_bench_scale(const ClusterBenchScaleOptions& opts);

}  // namespace keel::cli
