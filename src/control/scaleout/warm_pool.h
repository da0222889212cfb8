// WarmPool: task executors started ahead of need without a model (`keel te --warm`), kept by a
// ProcessSupervisor, and bound to a model on demand (bind_model.h). bind() takes idle warm TEs
// out of the pool and binds them concurrently; start_and_bind() is the cold path for comparison —
// it starts each TE only at the decision and binds it as soon as its process is up. refill()
// brings the pool back to its target size (the caller runs it off the request path).
//
// A bound TE stays supervised (and is stopped with the supervisor); the pool forgets it.
//
// Thread safety: one owner thread (the supervisor's rule); bind() uses a thread per TE for the
// calls only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "cluster/protocol/bind_model.h"
#include "cluster/protocol/te_spec.h"
#include "core/result.h"
#include "proc/process_supervisor.h"

namespace keel::control {

struct WarmPoolConfig {
  // What runs keel (executor_launch.h: its path, possibly behind `ip netns exec NS`) and the warm
  // TEs' spec (warm set; the pool sets each one's id, and its store_dir under store_root).
  std::vector<std::string> keel_command;
  cluster::TeSpec spec;
  std::string name_prefix = "warm-te";
  std::chrono::milliseconds start_timeout{60000};  // fork → warm ready line
  std::chrono::milliseconds bind_timeout{300000};  // bind → reply (the model's whole load)
  // Non-empty: each TE gets its own model store, "<this>/<TE name>" (made here, its spec's
  // store_dir), as if each ran on its own host — forks between them (bench-scale, tests).
  std::string store_root;
  // The address the TEs' bind ports are reached at: spec.host must make them listen there (with
  // a command prefix such as `ip netns exec NS` they may run in another network namespace, as
  // another host).
  std::string host = "127.0.0.1";
};

struct BoundTe {
  std::string name;
  pid_t pid = 0;
  std::string address;          // its control address "127.0.0.1:port"
  std::string weights_address;  // its weights service (fork source for others); "" = none
  cluster::BindReply reply;     // reply.phases: the scale-out's marks
  int64_t replied_ns = 0;       // when the binder had the reply (steady clock)
};

class WarmPool {
 public:
  WarmPool(proc::ProcessSupervisor* supervisor, WarmPoolConfig config)
      : sup_(supervisor), config_(std::move(config)) {}

  // Starts warm TEs until `target` are idle (each waits for its ready line).
  Status refill(int target);
  [[nodiscard]] size_t idle() const { return idle_.size(); }

  // Binds min(n, idle()) idle TEs to `bind` concurrently; one result per TE, in pool order.
  [[nodiscard]] std::vector<Result<BoundTe>> bind(int n, const cluster::BindModel& bind);
  // The next min(n, idle()) idle TEs, in the order bind_each() takes them.
  struct IdleTe {
    std::string name;
    std::string store_dir;        // its own store (store_root/name); "" = the TEs' shared one
    std::string weights_address;  // its weights service; "" = none
  };
  [[nodiscard]] std::vector<IdleTe> peek(int n) const;
  // Binds the next binds.size() idle TEs (at most idle()), TE i to binds[i], concurrently.
  [[nodiscard]] std::vector<Result<BoundTe>> bind_each(
      const std::vector<cluster::BindModel>& binds);
  // Fork by chain relay: as bind(), but TE 0 forks from bind.fork_from and TE i from TE i-1's
  // weights service (which relays the chunks as they reach it). The TEs need --store-dir.
  [[nodiscard]] std::vector<Result<BoundTe>> bind_chain(int n, const cluster::BindModel& bind);
  // Cold path: starts n new TEs one after another, binding each (concurrently with the next
  // start) once its process is up.
  [[nodiscard]] std::vector<Result<BoundTe>> start_and_bind(int n, const cluster::BindModel& bind);

 private:
  struct WarmTe {
    std::string name;
    pid_t pid = 0;
    int bind_port = 0;
    int weights_port = 0;  // its weights service (ready line "weights_port"); 0 = none
  };
  Result<WarmTe> start_one();

  proc::ProcessSupervisor* sup_;  // not owned
  WarmPoolConfig config_;
  std::vector<WarmTe> idle_;
  int next_id_ = 0;
};

}  // namespace keel::control
