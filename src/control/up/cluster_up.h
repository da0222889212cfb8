// `keel cluster up`: the whole tree. Task executors start first, each a child process with its
// share of the cores (or, with --nodes auto, through the node agents: up_children.h); then the
// job executors, given every TE's address; then the gateway — keel's OpenAI server with a
// FleetClient as its engine — in this process. A child that does not start in time stops the
// whole start-up. On a stop signal the tree drains in order: the gateway stops accepting and lets
// in-flight requests finish (--drain-timeout), then the JEs stop, then the TEs. Children are
// stopped by PID and die with this process. Before any of it, the process joins the membership
// and campaigns to lead the "cluster-manager" election (a standby waits there); it registers the
// JEs, TEs and the gateway it starts, and revokes them all at shutdown. With --nodes auto a
// standby does not wait idle: it starts its JEs (they follow the TEs in the membership) and its
// gateway and serves, and when it wins the election it takes the TEs over
// (ClusterNodes::take_over).
//
// What only the starting program knows comes through UpHooks: the binary the children run, what a
// model name stands for (a built-in model, a download), the served model's id and the gateway's
// HTTP front.
//
// Thread safety: runs on the caller's thread until a stop signal (blocked by the caller).
#pragma once

#include <signal.h>

#include <functional>
#include <string>
#include <vector>

#include "control/up/up_options.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "server/server.h"

namespace keel::control {

struct UpHooks {
  std::vector<std::string> keel_command;  // what the children run (TEs, JEs, stages)
  // The model file a name stands for; none: the name is the path.
  std::function<Result<std::string>(const std::string& model, ThreadPool& pool)> resolve_model;
  // The served model's id from --served-model-name (`given`), the model as named and its file;
  // none: `given`, else the file's stem.
  std::function<std::string(const std::string& given, const std::string& model,
                            const std::string& path)>
      model_name;
  // The gateway's HTTP front: host, port, API key, limits, PIC mode, state directory (its model
  // name and LoRA routes are set here).
  server::ServerConfig gateway;
};

Status run_cluster_up(const ClusterUpOptions& o, const UpHooks& hooks,
                      const sigset_t& stop_signals);

}  // namespace keel::control
