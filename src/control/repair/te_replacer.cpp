// TeReplacer (see te_replacer.h): detection, kill, replacement, add_te, metrics and events.
#include "control/repair/te_replacer.h"

#include <chrono>
#include <cstdio>

#include "cluster/protocol/bind_model.h"
#include "cluster/protocol/executor_launch.h"
#include "core/log.h"
#include "proc/ready_line.h"

namespace keel::control {

using cluster::Json;
using cluster::ManagedTe;

Status TeReplacerConfig::validate() const {
  if (!fleet) return Status::invalid_argument("te replacer: no fleet source");
  if (start_timeout.count() <= 0) return Status::invalid_argument("start timeout must be > 0");
  if (poll_interval.count() <= 0) return Status::invalid_argument("poll interval must be > 0");
  if (warm_idle && !warm_bind) return Status::invalid_argument("warm pool without a binder");
  return Status::ok_status();
}

TeReplacer::TeReplacer(std::shared_ptr<ExecutorProcesses> processes, TeReplacerConfig config)
    : processes_(std::move(processes)),
      config_(std::move(config)),
      caller_(config_.caller ? config_.caller : std::make_shared<LinkCaller>()),
      clock_(config_.clock ? config_.clock : &steady_) {}

Result<std::unique_ptr<TeReplacer>> TeReplacer::create(std::shared_ptr<ExecutorProcesses> processes,
                                                       TeReplacerConfig config) {
  KEEL_TRY(config.validate());
  if (!processes) return Status::invalid_argument("te replacer: nothing starts processes");
  std::unique_ptr<TeReplacer> r(new TeReplacer(std::move(processes), std::move(config)));
  if (!r->config_.event_log.empty()) {
    r->log_.emplace(r->config_.event_log, std::ios::app);
    if (!*r->log_) return Status::io_error(r->config_.event_log + ": cannot open the event log");
  }
  return r;
}

void TeReplacer::manage(ManagedTe te) { managed_.push_back(std::move(te)); }

std::vector<std::string> TeReplacer::live_addresses() const {
  std::vector<std::string> out;
  for (const ManagedTe& te : managed_) {
    if (!te.replaced && !te.address.empty()) out.push_back(te.address);
  }
  return out;
}

void TeReplacer::log_event(const Json& event) {
  if (log_) *log_ << event.dump() << "\n" << std::flush;
}

void TeReplacer::tick(const std::vector<proc::ChildExit>& exits) {
  // Children that exited on their own: dead now, no JE needed to tell.
  for (const proc::ChildExit& e : exits) {
    for (size_t i = 0; i < managed_.size(); ++i) {
      if (managed_[i].replaced || managed_[i].pid != e.pid) continue;
      replace({i, cluster::health::TeState::kDead, cluster::ReplaceHow::kColdStart}, true);
    }
  }
  const int64_t now = clock_->now_ns();
  if (last_poll_ns_ &&
      now - *last_poll_ns_ < std::chrono::nanoseconds(config_.poll_interval).count()) {
    return;
  }
  last_poll_ns_ = now;
  Result<cluster::FleetSnapshot> fleet = config_.fleet();
  if (!fleet.ok()) return;  // no JE answered: try at the next poll
  const int idle = config_.warm_idle ? config_.warm_idle() : 0;
  for (const cluster::ReplaceAction& a : cluster::decide_replacements(*fleet, managed_, idle)) {
    replace(a, false);
  }
}

Status TeReplacer::call_jes(const net::Message& m, std::chrono::milliseconds timeout) {
  Status first;
  for (const std::string& je : config_.je_addresses) {
    Result<Json> reply = caller_->call(je, m, timeout);
    const Status s = reply.ok() ? cluster::decode_status_body(*reply) : reply.status();
    // A JE that does not list the TE (NotFound) has nothing to do.
    if (!s.ok() && s.code() != StatusCode::kNotFound && first.ok()) {
      first = Status(s.code(), "je " + je + ": " + s.message());
    }
  }
  return first;
}

void TeReplacer::replace(const cluster::ReplaceAction& action, bool exited) {
  const int64_t detected = clock_->now_ns();
  ManagedTe old = managed_[action.te_idx];
  managed_[action.te_idx].replaced = true;
  const bool hung = action.state == cluster::health::TeState::kHung;
  {
    MutexLock lock(mu_);
    ++(hung ? hung_total_ : dead_total_);
  }
  log_event(Json{{"event", hung ? "te_hung" : "te_dead"},
                 {"te", old.name},
                 {"pid", old.pid},
                 {"address", old.address},
                 {"exited", exited},
                 {"t_ns", cluster::steady_now_ns()}});
  KEEL_LOG_WARN("cluster: te {} (pid {}) is {}{}: replacing it", old.name, old.pid,
                cluster::health::te_state_name(action.state), exited ? " (exited)" : "");
  if (!exited) {
    // SIGKILL at once, no SIGTERM first: the TE's jobs are being re-driven, and a TE woken by a
    // graceful stop would drain — cancel its tasks and send their error events to the gateway,
    // where they could arrive before the JE's new attempt number and end a client's stream.
    processes_->kill(old.pid);
  }
  // The JEs drop it from their fleet lists (they already counted it hung or dead).
  if (Status s = call_jes(encode(cluster::RemoveTe{old.address, /*forget=*/true}),
                          std::chrono::milliseconds(5000));
      !s.ok()) {
    KEEL_LOG_WARN("cluster: removing te {} from the JEs: {}", old.name, s.message());
  }
  const bool warm = action.how == cluster::ReplaceHow::kWarmPool && config_.warm_bind;
  Result<ManagedTe> fresh = warm ? config_.warm_bind(old.role) : cold_start(old);
  if (!fresh.ok() && warm) fresh = cold_start(old);  // the pool failed: a cold start instead
  const double seconds = static_cast<double>(clock_->now_ns() - detected) * 1e-9;
  if (!fresh.ok()) {
    {
      MutexLock lock(mu_);
      ++replace_failed_total_;
    }
    KEEL_LOG_WARN("cluster: replacing te {} failed: {}", old.name, fresh.status().message());
    log_event(Json{
        {"event", "te_replace_failed"}, {"te", old.name}, {"error", fresh.status().message()}});
    return;
  }
  {
    MutexLock lock(mu_);
    ++replaced_total_;
    replace_seconds_.add(seconds);
  }
  KEEL_LOG_INFO("cluster: te {} replaced by {} at {} ({}) in {:.3f} s", old.name, fresh->name,
                fresh->address, warm ? "warm pool" : "cold start", seconds);
  log_event(Json{{"event", "te_replaced"},
                 {"te", old.name},
                 {"by", fresh->name},
                 {"pid", fresh->pid},
                 {"address", fresh->address},
                 {"how", warm ? "warm_pool" : "cold_start"},
                 {"detect_to_ready_s", seconds}});
  if (fresh->keel_command.empty()) {  // warm-bound: a later cold replacement starts like `old`
    fresh->keel_command = old.keel_command;
    fresh->spec = cluster::replacement_spec(old.spec, fresh->name);
  }
  fresh->role = old.role;
  managed_.push_back(std::move(*fresh));
}

Result<ManagedTe> TeReplacer::cold_start(const ManagedTe& old) {
  ManagedTe te;
  te.name = "te-" + std::to_string(next_id_++);
  te.keel_command = old.keel_command;
  te.spec = cluster::replacement_spec(old.spec, te.name);
  te.role = old.role;
  KEEL_ASSIGN_OR_RETURN(proc::Child child, processes_->spawn(cluster::te_child(
                                               te.keel_command, te.spec, config_.start_timeout)));
  te.pid = child.pid;
  Result<int> port = proc::ready_port(child.ready);
  Status added = port.status();
  if (port.ok()) {
    te.address = "127.0.0.1:" + std::to_string(*port);
    added = call_jes({std::string(cluster::msg::kAddTe), Json{{"address", te.address}}},
                     std::chrono::milliseconds(30000));
  }
  if (!added.ok()) {  // not in every JE's fleet: it would serve some and not others
    processes_->stop(te.pid);
    return added;
  }
  return te;
}

std::string TeReplacer::metrics_text() const {
  MutexLock lock(mu_);
  std::string out;
  const auto counter = [&](const char* name, const char* help, int64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name +
           " " + std::to_string(v) + "\n";
  };
  counter("keel:cluster_te_hung_total", "Task executors found hung (work and no progress).",
          hung_total_);
  counter("keel:cluster_te_dead_total", "Task executors found dead (exited, link gone).",
          dead_total_);
  counter("keel:cluster_te_replaced_total", "Task executors replaced.", replaced_total_);
  counter("keel:cluster_te_replace_failed_total", "Replacements that failed.",
          replace_failed_total_);
  const std::string name = "keel:cluster_te_replacement_seconds";
  out +=
      "# HELP " + name + " Detection of a hung or dead TE to its replacement added to the JEs.\n";
  out += "# TYPE " + name + " histogram\n";
  out += replace_seconds_.text(name);
  return out;
}

}  // namespace keel::control
