// JeReplacer (see je_replacer.h): exits seen, restarts at the same address, metrics and events.
#include "control/repair/je_replacer.h"

#include <algorithm>

#include "cluster/protocol/bind_model.h"
#include "cluster/protocol/executor_launch.h"
#include "core/log.h"
#include "net/host_port.h"

namespace keel::control {

using cluster::Json;

Status JeReplacerConfig::validate() const {
  if (!fleet) return Status::invalid_argument("je replacer: no fleet source");
  if (start_timeout.count() <= 0) return Status::invalid_argument("start timeout must be > 0");
  if (poll_interval.count() <= 0) return Status::invalid_argument("poll interval must be > 0");
  if (te_connect_timeout.count() <= 0) {
    return Status::invalid_argument("te connect timeout must be > 0");
  }
  return Status::ok_status();
}

JeReplacer::JeReplacer(std::shared_ptr<ExecutorProcesses> processes, JeReplacerConfig config)
    : processes_(std::move(processes)),
      config_(std::move(config)),
      clock_(config_.clock ? config_.clock : &steady_) {}

Result<std::unique_ptr<JeReplacer>> JeReplacer::create(std::shared_ptr<ExecutorProcesses> processes,
                                                       JeReplacerConfig config) {
  KEEL_TRY(config.validate());
  if (!processes) return Status::invalid_argument("je replacer: nothing starts processes");
  std::unique_ptr<JeReplacer> r(new JeReplacer(std::move(processes), std::move(config)));
  if (!r->config_.event_log.empty()) {
    r->log_.emplace(r->config_.event_log, std::ios::app);
    if (!*r->log_) return Status::io_error(r->config_.event_log + ": cannot open the event log");
  }
  return r;
}

void JeReplacer::manage(cluster::ManagedJe je) { managed_.push_back(std::move(je)); }

void JeReplacer::log_event(const Json& event) {
  if (log_) *log_ << event.dump() << "\n" << std::flush;
}

void JeReplacer::tick(const std::vector<proc::ChildExit>& exits) {
  const int64_t now = clock_->now_ns();
  for (const proc::ChildExit& e : exits) {
    for (size_t i = 0; i < managed_.size(); ++i) {
      cluster::ManagedJe& je = managed_[i];
      if (je.pid == 0 || je.pid != e.pid) continue;
      {
        MutexLock lock(mu_);
        ++dead_total_;
      }
      KEEL_LOG_WARN("cluster: je {} (pid {}) is dead ({}): restarting it at {}", je.name, je.pid,
                    e.describe(), je.address);
      log_event(Json{{"event", "je_dead"},
                     {"je", je.name},
                     {"pid", je.pid},
                     {"address", je.address},
                     {"exit", e.describe()},
                     {"t_ns", cluster::steady_now_ns()}});
      je.pid = 0;
      down_.push_back(Down{i, now, now});
    }
  }
  const int64_t poll_ns = std::chrono::nanoseconds(config_.poll_interval).count();
  if (!down_.empty() || !last_poll_ns_ || now - *last_poll_ns_ >= poll_ns) {
    last_poll_ns_ = now;
    Result<cluster::FleetSnapshot> fleet = config_.fleet();  // another JE's view, when one answers
    if (fleet.ok()) last_fleet_ = std::move(*fleet);
  }
  for (Down& d : down_) {
    if (clock_->now_ns() >= d.next_try_ns) restart(d);
  }
  std::erase_if(down_, [&](const Down& d) { return managed_[d.je_idx].pid != 0; });
}

void JeReplacer::restart(Down& down) {
  cluster::ManagedJe& je = managed_[down.je_idx];
  const Result<net::HostPort> hp = net::parse_host_port(je.address);
  const std::vector<std::string> tes = cluster::replacement_te_addresses(
      last_fleet_ ? *last_fleet_ : cluster::FleetSnapshot{},
      config_.known_tes ? config_.known_tes() : std::vector<std::string>{});
  const cluster::JeSpec spec = cluster::je_replacement_spec(je.spec, hp.ok() ? hp->port : 0, tes,
                                                            config_.te_connect_timeout);
  Result<proc::Child> child =
      processes_->spawn(cluster::je_child(je.keel_command, spec, config_.start_timeout));
  const double seconds = static_cast<double>(clock_->now_ns() - down.detected_ns) * 1e-9;
  if (!child.ok()) {
    down.next_try_ns = clock_->now_ns() + std::chrono::nanoseconds(config_.retry_interval).count();
    {
      MutexLock lock(mu_);
      ++replace_failed_total_;
    }
    KEEL_LOG_WARN("cluster: restarting je {} failed (trying again in {} ms): {}", je.name,
                  config_.retry_interval.count(), child.status().message());
    log_event(
        Json{{"event", "je_replace_failed"}, {"je", je.name}, {"error", child.status().message()}});
    return;
  }
  je.pid = child->pid;
  {
    MutexLock lock(mu_);
    ++replaced_total_;
    replace_seconds_.add(seconds);
  }
  KEEL_LOG_INFO("cluster: je {} restarted at {} (pid {}) with {} TEs in {:.3f} s", je.name,
                je.address, je.pid, tes.size(), seconds);
  log_event(Json{{"event", "je_replaced"},
                 {"je", je.name},
                 {"pid", je.pid},
                 {"address", je.address},
                 {"tes", tes.size()},
                 {"detect_to_ready_s", seconds}});
}

std::string JeReplacer::metrics_text() const {
  MutexLock lock(mu_);
  std::string out;
  const auto counter = [&](const char* name, const char* help, int64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name +
           " " + std::to_string(v) + "\n";
  };
  counter("keel:cluster_je_dead_total", "Job executors that exited on their own.", dead_total_);
  counter("keel:cluster_je_replaced_total", "Job executors restarted.", replaced_total_);
  counter("keel:cluster_je_replace_failed_total", "Job executor restarts that failed.",
          replace_failed_total_);
  const std::string name = "keel:cluster_je_replacement_seconds";
  out += "# HELP " + name + " A job executor's exit seen to its replacement ready.\n";
  out += "# TYPE " + name + " histogram\n";
  out += replace_seconds_.text(name);
  return out;
}

}  // namespace keel::control
