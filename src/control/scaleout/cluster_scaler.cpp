// ClusterScaler (see cluster_scaler.h).
#include "control/scaleout/cluster_scaler.h"

#include <algorithm>
#include <filesystem>

#include "cluster/protocol/messages.h"
#include "core/file_system.h"
#include "core/log.h"
#include "store/demand_board.h"
#include "store/preload_plan.h"

namespace keel::control {

ClusterScaler::ClusterScaler(proc::ProcessSupervisor* sup, ClusterScalerConfig config)
    : config_(std::move(config)),
      pool_(sup, control::WarmPoolConfig{config_.keel_command, config_.warm_te, "warm-te",
                                         config_.start_timeout, std::chrono::milliseconds(300000),
                                         config_.te_store_root}),
      sup_(sup) {}

ClusterScaler::~ClusterScaler() { shutdown(); }

Result<std::unique_ptr<ClusterScaler>> ClusterScaler::start(proc::ProcessSupervisor* sup,
                                                            ClusterScalerConfig config) {
  std::unique_ptr<ClusterScaler> s(new ClusterScaler(sup, std::move(config)));
  if (!s->config_.event_log.empty()) {
    s->log_.emplace(s->config_.event_log, std::ios::app);
    if (!*s->log_) return Status::io_error(s->config_.event_log + ": cannot open the event log");
  }
  if (!s->config_.store_dir.empty()) {
    PosixFileSystem fs;
    store::ModelStore st({s->config_.store_dir, s->config_.store_budget}, &fs, &s->sealed_);
    KEEL_TRY(st.config().validate());
    // Under a budget, other models' entries are not evicted at start-up: the forecast decides.
    Result<store::PreloadResult> entry = st.preload(s->config_.model_path, s->config_.isa,
                                                    /*may_evict=*/s->config_.store_budget == 0);
    if (entry.ok()) {
      s->entry_ = std::move(*entry);
      s->entry_owned_ = !s->entry_->already_present;
      KEEL_LOG_INFO("cluster: model store entry {} ({} bytes, {:.2f} s{})", s->entry_->path,
                    s->entry_->bytes, s->entry_->seconds,
                    s->entry_->already_present ? ", already present" : "");
      if (s->config_.store_budget > 0) s->log_forecast("preload", 0.0, s->entry_->path, {});
    } else if (entry.status().code() == StatusCode::kResourceExhausted &&
               s->config_.store_budget > 0) {
      KEEL_LOG_INFO(
          "cluster: no model store entry at start: {}; TEs read the file until the "
          "forecast preloads it",
          entry.status().message());
      s->log_forecast("skip", 0.0, entry.status().message(), {});
    } else {
      return entry.status();
    }
  }
  if (s->entry_) {
    s->key_ = s->entry_->key;
  } else if (!s->config_.te_store_root.empty() || !s->config_.store_dir.empty()) {
    PosixFileSystem fs;
    KEEL_ASSIGN_OR_RETURN(s->key_, store::key_for_file(fs, s->config_.model_path, s->config_.isa));
  }
  if (s->key_) s->entry_name_ = store::entry_name(*s->key_);
  ClusterScaler* self = s.get();
  KEEL_ASSIGN_OR_RETURN(
      s->server_, net::LinkServer::start("127.0.0.1", 0, [self](net::Link& link, net::Message m) {
        self->on_message(link, std::move(m));
      }));
  KEEL_TRY(s->pool_.refill(s->config_.warm_pool));
  KEEL_LOG_INFO("cluster: warm pool of {} TEs, scale-out control at 127.0.0.1:{}",
                s->config_.warm_pool, s->control_port());
  return s;
}

void ClusterScaler::on_message(net::Link& link, net::Message m) {
  if (m.type != kScaleOut || !m.body.is_object()) return;
  const auto id = m.body.find("call_id");
  if (id == m.body.end() || !id->is_number_integer()) return;
  const auto n = m.body.find("tes");
  const int tes = n != m.body.end() && n->is_number_integer()
                      ? static_cast<int>(std::clamp<int64_t>(n->get<int64_t>(), 1, 64))
                      : 1;
  const std::string role_name = m.body.value("role", std::string("colocated"));
  const std::optional<cluster::TeRole> role = cluster::parse_te_role(role_name);
  if (!role) {
    link.reply(id->get<int64_t>(),
               cluster::Json{{"ok", false}, {"errors", {"unknown role '" + role_name + "'"}}});
    return;
  }
  MutexLock lock(mu_);
  requests_.push_back({link.shared_from_this(), id->get<int64_t>(), tes, *role});
}

Status ClusterScaler::add_to_jes(const std::string& te_address) {
  for (const std::string& je : config_.je_addresses) {
    KEEL_ASSIGN_OR_RETURN(
        std::shared_ptr<net::Link> link,
        net::Link::connect(
            je, std::chrono::milliseconds(5000), [](net::Link&, net::Message) {}, nullptr));
    Result<cluster::Json> reply =
        link->call({std::string(cluster::msg::kAddTe), cluster::Json{{"address", te_address}}},
                   std::chrono::milliseconds(30000));
    link->close();
    if (!reply.ok()) return reply.status();
    KEEL_TRY(cluster::decode_status_body(*reply));
  }
  return {};
}

void ClusterScaler::add_peer(pid_t pid, std::string weights_address) {
  if (pid > 0 && !weights_address.empty()) peers_.push_back({pid, std::move(weights_address)});
}

std::vector<std::string> ClusterScaler::live_peers() const {
  std::vector<std::string> out;
  const std::vector<proc::Child> live = sup_->children();
  for (const Peer& p : peers_) {
    const bool alive =
        std::any_of(live.begin(), live.end(), [&](const proc::Child& c) { return c.pid == p.pid; });
    if (alive) out.push_back(p.weights_address);
  }
  return out;
}

std::vector<cluster::BindModel> ClusterScaler::plan_binds(
    int n, cluster::TeRole role, std::vector<cluster::BindSourcePlan>* plans) const {
  cluster::BindModel bind;
  bind.model_path = config_.model_path;
  bind.role = std::string(cluster::te_role_name(role));
  if (const auto engine = config_.role_engine.find(role); engine != config_.role_engine.end()) {
    bind.engine = engine->second;
  }
  bind.store_entry = entry_name_;
  bind.decision_ns = cluster::steady_now_ns();
  std::vector<cluster::BindTarget> targets;
  for (const control::WarmPool::IdleTe& te : pool_.peek(n)) {
    const std::string dir = te.store_dir.empty() ? config_.store_dir : te.store_dir;
    const bool held =
        !dir.empty() && !entry_name_.empty() && std::filesystem::exists(dir + "/" + entry_name_);
    targets.push_back({held, te.weights_address});
  }
  *plans =
      cluster::plan_bind_sources(config_.bind_source, targets,
                                 entry_name_.empty() ? std::vector<std::string>{} : live_peers());
  std::vector<cluster::BindModel> binds(plans->size(), bind);
  for (size_t i = 0; i < binds.size(); ++i) {
    binds[i].fork_from = (*plans)[i].fork_from;
    binds[i].use_store = config_.bind_source != cluster::BindSourceMode::kDisk;
  }
  return binds;
}

cluster::Json ClusterScaler::scale_out(int tes, cluster::TeRole role) {
  const int64_t decision_ns = cluster::steady_now_ns();
  cluster::Json out = {{"ok", true}, {"tes", cluster::Json::array()}};
  if (static_cast<int>(pool_.idle()) < tes) {  // cold-start the rest now rather than wait
    const int cold = tes - static_cast<int>(pool_.idle());
    KEEL_LOG_INFO("cluster: scale-out of {}: the warm pool has {} idle; cold-starting {}", tes,
                  pool_.idle(), cold);
    out["cold_started"] = cold;
    if (Status s = pool_.refill(tes); !s.ok()) out["errors"].push_back(s.to_string());
  }
  std::vector<cluster::BindSourcePlan> plans;
  std::vector<cluster::BindModel> binds = plan_binds(tes, role, &plans);
  for (cluster::BindModel& b : binds) b.decision_ns = decision_ns;
  std::vector<Result<control::BoundTe>> bound = pool_.bind_each(binds);
  for (size_t i = 0; i < bound.size(); ++i) {
    Result<control::BoundTe>& r = bound[i];
    Status s = r.ok() ? add_to_jes(r->address) : r.status();
    if (!s.ok()) {
      out["ok"] = false;
      out["errors"].push_back(s.to_string());
      continue;
    }
    if ((r->reply.from_store || r->reply.forked) && !entry_name_.empty()) {
      add_peer(r->pid, r->weights_address);  // it serves the entry from now on
    }
    metrics_.observe(r->reply.phases);
    cluster::Json event = control::scale_out_event(r->name, r->pid, r->address, r->reply);
    event["role"] = std::string(cluster::te_role_name(role));
    event["bind_source"] = cluster::bind_source_kind_name(plans[i].kind);
    event["bind_source_why"] = plans[i].why;
    if (!plans[i].fork_from.empty()) event["fork_from"] = plans[i].fork_from;
    if (log_) *log_ << event.dump() << "\n" << std::flush;
    KEEL_LOG_INFO("cluster: scale-out: {} ({}) at {} ready in {:.3f} s ({}{})", r->name,
                  cluster::te_role_name(role), r->address, event["ready_s"].get<double>(),
                  r->reply.forked       ? "forked from " + plans[i].fork_from
                  : r->reply.from_store ? std::string("model store")
                                        : "file: " + r->reply.store_note,
                  r->reply.fork_error.empty() ? "" : "; fork failed: " + r->reply.fork_error);
    out["tes"].push_back(std::move(event));
  }
  if (out["tes"].empty()) out["ok"] = false;
  return out;
}

void ClusterScaler::log_forecast(const std::string& action, double rate, const std::string& what,
                                 const std::vector<std::string>& evicted) {
  if (!log_) return;
  cluster::Json e = {{"event", "forecast"},
                     {"action", action},
                     {"model", config_.model_path},
                     {"rate", rate},
                     {"entry", what}};
  if (!evicted.empty()) e["evicted"] = evicted;
  *log_ << e.dump() << "\n" << std::flush;
}

// An entry this manager built and holds that another process evicted (its link is gone): let its
// memfd go, so that the memory the other's budget counted as free is freed.
void ClusterScaler::release_if_evicted() {
  if (!entry_ || !entry_owned_ || !sealed_.holds(entry_->path)) return;
  std::error_code ec;
  if (std::filesystem::symlink_status(entry_->path, ec).type() ==
      std::filesystem::file_type::symlink) {
    return;
  }
  sealed_.release(entry_->path);
  KEEL_LOG_INFO("cluster: model store entry {} was evicted by another preload: released",
                entry_->path);
  log_forecast("released", rate_, entry_->path, {});
  entry_.reset();
  entry_owned_ = false;
}

void ClusterScaler::forecast() {
  if (config_.store_dir.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  if (last_requests_ >= 0 && now - last_forecast_ < std::chrono::seconds(1)) return;
  release_if_evicted();
  if (!config_.requests_total || config_.store_budget == 0) {
    last_requests_ = 0;  // once a second from now on
    last_forecast_ = now;
    return;
  }
  const int64_t total = config_.requests_total();
  if (last_requests_ >= 0) {
    const double dt = std::chrono::duration<double>(now - last_forecast_).count();
    rate_ = store::ewma_rate(rate_, static_cast<double>(total - last_requests_) / dt, dt,
                             config_.rate_half_life_s);
  }
  last_requests_ = total;
  last_forecast_ = now;
  PosixFileSystem fs;
  store::ModelStore st({config_.store_dir, config_.store_budget}, &fs, &sealed_);
  const std::optional<store::StoreKey>& key = key_;  // known since start()
  if (!key) return;
  const std::string& own = entry_name_;
  const double unix_now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const uint64_t bytes = entry_ ? entry_->bytes : std::filesystem::file_size(config_.model_path);
  // The snapshot: every manager's fresh note on the store's board, this one's included.
  store::PreloadSnapshot snap;
  snap.budget_bytes = config_.store_budget;
  snap.min_rate = config_.min_rate;
  snap.models.push_back({own, bytes, rate_, fs.exists(st.path_of(*key))});
  if (Status s =
          store::post_demand(config_.store_dir, {own, config_.model_path, bytes, rate_, unix_now});
      !s.ok()) {
    KEEL_LOG_WARN("cluster: forecast: {}", s.message());
  }
  posted_demand_ = own;
  for (const store::DemandNote& n : store::read_demands(config_.store_dir, unix_now, 5.0)) {
    if (n.entry == own) continue;
    snap.models.push_back({n.entry, n.bytes, n.rate, fs.exists(config_.store_dir + "/" + n.entry)});
  }
  apply_forecast(store::plan_preloads(snap), st, *key);
}

// This manager carries out the plan's actions on its own model: its preload (with the evictions
// that make room for it) or its eviction. Other models' preloads are their managers' to make.
void ClusterScaler::apply_forecast(const std::vector<store::PreloadAction>& actions,
                                   store::ModelStore& st, const store::StoreKey& key) {
  const std::string own = store::entry_name(key);
  const bool preload_own = std::any_of(actions.begin(), actions.end(), [&](const auto& a) {
    return a.kind == store::PreloadActionKind::kPreload && a.model == own;
  });
  std::vector<std::string> evicted;
  for (const store::PreloadAction& a : actions) {
    if (a.kind == store::PreloadActionKind::kEvict && a.model == own) {
      KEEL_LOG_INFO("cluster: forecast {:.2f} req/s: evict {}", rate_, own);
      log_forecast("evict", rate_, st.path_of(key), {});
      (void)st.remove(key);
      entry_.reset();
      entry_owned_ = false;
    } else if (a.kind == store::PreloadActionKind::kEvict && preload_own) {
      const std::optional<store::StoreKey> other = store::parse_entry_name(a.model);
      if (other && st.remove(*other).ok()) evicted.push_back(a.model);
    } else if (a.kind == store::PreloadActionKind::kPreload && a.model == own) {
      Result<store::PreloadResult> r = st.preload(config_.model_path, config_.isa);
      KEEL_LOG_INFO("cluster: forecast {:.2f} req/s: preload {}: {}", rate_, config_.model_path,
                    r.ok() ? r->path : r.status().message());
      if (r.ok()) evicted.insert(evicted.end(), r->evicted.begin(), r->evicted.end());
      log_forecast("preload", rate_, r.ok() ? r->path : r.status().message(), evicted);
      if (r.ok() && !r->already_present) {
        entry_ = *r;
        entry_owned_ = true;
      }
    }
  }
}

void ClusterScaler::tick() {
  forecast();
  std::deque<Request> requests;
  {
    MutexLock lock(mu_);
    requests.swap(requests_);
  }
  for (Request& req : requests) {
    req.link->reply(req.call_id, scale_out(std::max(1, req.tes), req.role));
  }
  if (!requests.empty() || static_cast<int>(pool_.idle()) < config_.warm_pool) {
    if (Status s = pool_.refill(config_.warm_pool); !s.ok()) {
      KEEL_LOG_WARN("cluster: warm pool refill failed: {}", s.message());
    }
  }
}

void ClusterScaler::shutdown() {
  if (server_) server_->stop();
  if (!posted_demand_.empty()) store::withdraw_demand(config_.store_dir, posted_demand_);
  if (entry_ && entry_owned_) {
    PosixFileSystem fs;
    store::ModelStore st({config_.store_dir, 0}, &fs, &sealed_);
    const Status s = st.remove(entry_->key);
    KEEL_LOG_INFO("cluster: removed model store entry {}: {}", entry_->path,
                  s.ok() ? "ok" : s.message());
    entry_owned_ = false;
  }
}

}  // namespace keel::control
