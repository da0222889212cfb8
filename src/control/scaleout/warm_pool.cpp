// WarmPool (see warm_pool.h).
#include "control/scaleout/warm_pool.h"

#include <filesystem>
#include <thread>

#include "cluster/protocol/executor_launch.h"
#include "cluster/task/bind_listener.h"
#include "proc/ready_line.h"

namespace keel::control {
namespace {

Result<BoundTe> bind_one(const std::string& host, const std::string& name, pid_t pid, int port,
                         int weights_port, const cluster::BindModel& bind,
                         std::chrono::milliseconds timeout) {
  KEEL_ASSIGN_OR_RETURN(cluster::BindReply reply, cluster::bind_warm_te(host, port, bind, timeout));
  BoundTe out;
  out.replied_ns = cluster::steady_now_ns();
  if (!reply.status.ok()) {
    return Status::unavailable(name + ": bind failed: " + reply.status.message());
  }
  out.name = name;
  out.pid = pid;
  out.address = host + ":" + std::to_string(reply.port);
  if (weights_port > 0) out.weights_address = host + ":" + std::to_string(weights_port);
  out.reply = std::move(reply);
  return out;
}

}  // namespace

Result<WarmPool::WarmTe> WarmPool::start_one() {
  cluster::TeSpec te = config_.spec;
  te.id = config_.name_prefix + "-" + std::to_string(next_id_++);
  te.warm = true;
  if (!config_.store_root.empty()) {
    te.store_dir = config_.store_root + "/" + te.id;
    std::error_code ec;
    std::filesystem::create_directories(te.store_dir, ec);
    if (ec)
      return Status::io_error(te.store_dir + ": cannot create the TE's store: " + ec.message());
  }
  KEEL_ASSIGN_OR_RETURN(proc::Child child, sup_->spawn(cluster::te_child(config_.keel_command, te,
                                                                         config_.start_timeout)));
  if (child.ready.value("state", std::string()) != "warm") {
    return Status::invalid_argument(te.id +
                                    ": its ready line is not a warm TE's: " + child.ready.dump());
  }
  KEEL_ASSIGN_OR_RETURN(int port, proc::ready_port(child.ready));
  return WarmTe{child.name, child.pid, port, child.ready.value("weights_port", 0)};
}

Status WarmPool::refill(int target) {
  while (static_cast<int>(idle_.size()) < target) {
    KEEL_ASSIGN_OR_RETURN(WarmTe te, start_one());
    idle_.push_back(std::move(te));
  }
  return {};
}

std::vector<Result<BoundTe>> WarmPool::bind(int n, const cluster::BindModel& bind) {
  const size_t count = std::min(idle_.size(), static_cast<size_t>(std::max(n, 0)));
  return bind_each(std::vector<cluster::BindModel>(count, bind));
}

std::vector<Result<BoundTe>> WarmPool::bind_chain(int n, const cluster::BindModel& bind) {
  const size_t count = std::min(idle_.size(), static_cast<size_t>(std::max(n, 0)));
  std::vector<cluster::BindModel> binds(count, bind);
  for (size_t i = 1; i < count; ++i) {
    if (idle_[i - 1].weights_port <= 0) continue;  // no --store-dir: no relay; fork from the head
    binds[i].fork_from = config_.host + ":" + std::to_string(idle_[i - 1].weights_port);
  }
  return bind_each(binds);
}

std::vector<WarmPool::IdleTe> WarmPool::peek(int n) const {
  std::vector<IdleTe> out;
  for (size_t i = 0; i < idle_.size() && static_cast<int>(i) < n; ++i) {
    IdleTe t;
    t.name = idle_[i].name;
    if (!config_.store_root.empty()) t.store_dir = config_.store_root + "/" + idle_[i].name;
    if (idle_[i].weights_port > 0) {
      t.weights_address = config_.host + ":" + std::to_string(idle_[i].weights_port);
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<Result<BoundTe>> WarmPool::bind_each(const std::vector<cluster::BindModel>& binds) {
  const size_t count = std::min(idle_.size(), binds.size());
  std::vector<Result<BoundTe>> out(count, Status::internal("not bound"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < count; ++i) {
    threads.emplace_back([this, i, &out, &binds] {
      const WarmTe& te = idle_[i];
      out[i] = bind_one(config_.host, te.name, te.pid, te.bind_port, te.weights_port, binds[i],
                        config_.bind_timeout);
    });
  }
  for (std::thread& t : threads) t.join();
  idle_.erase(idle_.begin(), idle_.begin() + static_cast<std::ptrdiff_t>(count));
  return out;
}

std::vector<Result<BoundTe>> WarmPool::start_and_bind(int n, const cluster::BindModel& bind) {
  std::vector<Result<BoundTe>> out(static_cast<size_t>(std::max(n, 0)),
                                   Status::internal("not started"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < out.size(); ++i) {
    Result<WarmTe> te = start_one();
    if (!te.ok()) {
      out[i] = te.status();
      continue;
    }
    threads.emplace_back([this, i, &out, &bind, te = *te] {
      out[i] = bind_one(config_.host, te.name, te.pid, te.bind_port, te.weights_port, bind,
                        config_.bind_timeout);
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

}  // namespace keel::control
