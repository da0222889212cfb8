// JeReplacer (see je_replacer.h): exits seen, restarts at the same address, metrics and events.
#include "cluster/je_replacer.h"

#include <algorithm>

#include "cluster/bind_model.h"
#include "cluster/executor_launch.h"
#include "cluster/host_port.h"
#include "core/log.h"

namespace keel::cluster {

Status JeReplacerConfig::validate() const {
  if (!fleet) return Status::invalid_argument("je replacer: no fleet source");
  if (start_timeout.count() <= 0) return Status::invalid_argument("start timeout must be > 0");
  if (poll_interval.count() <= 0) return Status::invalid_argument("poll interval must be > 0");
  if (te_connect_timeout.count() <= 0) {
    return Status::invalid_argument("te connect timeout must be > 0");
  }
  return Status::ok_status();
}

JeSpec je_replacement_spec(JeSpec spec, uint16_t port, const std::vector<std::string>& te_addresses,
                           std::chrono::milliseconds connect_timeout) {
  spec.port = port;
  spec.tes = te_addresses;
  spec.te_connect_timeout_ms = connect_timeout.count();
  return spec;
}

std::vector<std::string> replacement_te_addresses(const FleetSnapshot& fleet,
                                                  const std::vector<std::string>& known) {
  std::vector<std::string> out;
  for (const TeInfo& te : fleet.tes) {
    if (health::serving(te.state) && !te.address.empty()) out.push_back(te.address);
  }
  for (const std::string& address : known) {
    const bool listed = std::any_of(fleet.tes.begin(), fleet.tes.end(),
                                    [&](const TeInfo& te) { return te.address == address; });
    if (!listed && std::find(out.begin(), out.end(), address) == out.end()) {
      out.push_back(address);
    }
  }
  return out;
}

JeReplacer::JeReplacer(proc::ProcessSupervisor* sup, JeReplacerConfig config)
    : sup_(sup), config_(std::move(config)) {}

Result<std::unique_ptr<JeReplacer>> JeReplacer::create(proc::ProcessSupervisor* sup,
                                                       JeReplacerConfig config) {
  KEEL_TRY(config.validate());
  std::unique_ptr<JeReplacer> r(new JeReplacer(sup, std::move(config)));
  if (!r->config_.event_log.empty()) {
    r->log_.emplace(r->config_.event_log, std::ios::app);
    if (!*r->log_) return Status::io_error(r->config_.event_log + ": cannot open the event log");
  }
  return r;
}

void JeReplacer::manage(ManagedJe je) { managed_.push_back(std::move(je)); }

void JeReplacer::log_event(const Json& event) {
  if (log_) *log_ << event.dump() << "\n" << std::flush;
}

void JeReplacer::tick(const std::vector<proc::ChildExit>& exits) {
  const Clock::time_point now = Clock::now();
  for (const proc::ChildExit& e : exits) {
    for (size_t i = 0; i < managed_.size(); ++i) {
      ManagedJe& je = managed_[i];
      if (je.pid == 0 || je.pid != e.pid) continue;
      {
        std::lock_guard lock(mu_);
        ++dead_total_;
      }
      KEEL_LOG_WARN("cluster: je {} (pid {}) is dead ({}): restarting it at {}", je.name, je.pid,
                    e.describe(), je.address);
      log_event(Json{{"event", "je_dead"},
                     {"je", je.name},
                     {"pid", je.pid},
                     {"address", je.address},
                     {"exit", e.describe()},
                     {"t_ns", steady_now_ns()}});
      je.pid = 0;
      down_.push_back(Down{i, now, now});
    }
  }
  if (!down_.empty() || now - last_poll_ >= config_.poll_interval) {
    last_poll_ = now;
    Result<FleetSnapshot> fleet = config_.fleet();  // another JE's view, when one answers
    if (fleet.ok()) last_fleet_ = std::move(*fleet);
  }
  for (Down& d : down_) {
    if (Clock::now() >= d.next_try) restart(d);
  }
  std::erase_if(down_, [&](const Down& d) { return managed_[d.je_idx].pid != 0; });
}

void JeReplacer::restart(Down& down) {
  ManagedJe& je = managed_[down.je_idx];
  const Result<HostPort> hp = parse_host_port(je.address);
  const std::vector<std::string> tes = replacement_te_addresses(
      last_fleet_ ? *last_fleet_ : FleetSnapshot{},
      config_.known_tes ? config_.known_tes() : std::vector<std::string>{});
  const JeSpec spec =
      je_replacement_spec(je.spec, hp.ok() ? hp->port : 0, tes, config_.te_connect_timeout);
  Result<proc::Child> child = sup_->spawn(je_child(je.keel_command, spec, config_.start_timeout));
  const double seconds = std::chrono::duration<double>(Clock::now() - down.detected).count();
  if (!child.ok()) {
    down.next_try = Clock::now() + config_.retry_interval;
    {
      std::lock_guard lock(mu_);
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
    std::lock_guard lock(mu_);
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
  std::lock_guard lock(mu_);
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

}  // namespace keel::cluster
