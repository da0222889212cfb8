// ClusterScaler (see cluster_scaler.h).
#include "cluster_scaler.h"

#include <algorithm>
#include <filesystem>

#include "cluster/messages.h"
#include "core/file_system.h"
#include "core/log.h"
#include "store/preload_plan.h"

namespace keel::cli {

ClusterScaler::ClusterScaler(cluster::ProcessSupervisor* sup, ClusterScalerConfig config)
    : config_(std::move(config)),
      pool_(sup, cluster::WarmPoolConfig{config_.warm_te_argv, "warm-te", config_.start_timeout,
                                         std::chrono::milliseconds(300000)}) {}

ClusterScaler::~ClusterScaler() { shutdown(); }

Result<std::unique_ptr<ClusterScaler>> ClusterScaler::start(cluster::ProcessSupervisor* sup,
                                                            ClusterScalerConfig config) {
  std::unique_ptr<ClusterScaler> s(new ClusterScaler(sup, std::move(config)));
  if (!s->config_.event_log.empty()) {
    s->log_.emplace(s->config_.event_log, std::ios::app);
    if (!*s->log_) return Status::io_error(s->config_.event_log + ": cannot open the event log");
  }
  if (!s->config_.store_dir.empty()) {
    PosixFileSystem fs;
    store::ModelStore st({s->config_.store_dir, s->config_.store_budget}, &fs);
    KEEL_TRY(st.config().validate());
    KEEL_ASSIGN_OR_RETURN(s->entry_, st.preload(s->config_.model_path, s->config_.isa));
    s->entry_owned_ = !s->entry_->already_present;
    KEEL_LOG_INFO("cluster: model store entry {} ({} bytes, {:.2f} s{})", s->entry_->path,
                  s->entry_->bytes, s->entry_->seconds,
                  s->entry_->already_present ? ", already present" : "");
  }
  ClusterScaler* self = s.get();
  KEEL_ASSIGN_OR_RETURN(s->listener_, cluster::Listener::start(
                                          "127.0.0.1", 0,
                                          [self](cluster::Link& link, cluster::Message m) {
                                            self->on_message(link, std::move(m));
                                          },
                                          nullptr,
                                          [self](std::shared_ptr<cluster::Link> link) {
                                            std::lock_guard lock(self->mu_);
                                            self->links_.push_back(std::move(link));
                                          }));
  KEEL_TRY(s->pool_.refill(s->config_.warm_pool));
  KEEL_LOG_INFO("cluster: warm pool of {} TEs, scale-out control at 127.0.0.1:{}",
                s->config_.warm_pool, s->control_port());
  return s;
}

void ClusterScaler::on_message(cluster::Link& link, cluster::Message m) {
  if (m.type != kScaleOut || !m.body.is_object()) return;
  const auto id = m.body.find("call_id");
  if (id == m.body.end() || !id->is_number_integer()) return;
  const auto n = m.body.find("tes");
  const int tes = n != m.body.end() && n->is_number_integer()
                      ? static_cast<int>(std::clamp<int64_t>(n->get<int64_t>(), 1, 64))
                      : 1;
  std::lock_guard lock(mu_);
  requests_.push_back({link.shared_from_this(), id->get<int64_t>(), tes});
}

Status ClusterScaler::add_to_jes(const std::string& te_address) {
  for (const std::string& je : config_.je_addresses) {
    KEEL_ASSIGN_OR_RETURN(
        std::shared_ptr<cluster::Link> link,
        cluster::Link::connect(
            je, std::chrono::milliseconds(5000), [](cluster::Link&, cluster::Message) {}, nullptr));
    Result<cluster::Json> reply =
        link->call({std::string(cluster::msg::kAddTe), cluster::Json{{"address", te_address}}},
                   std::chrono::milliseconds(30000));
    link->close();
    if (!reply.ok()) return reply.status();
    KEEL_TRY(cluster::decode_status_body(*reply));
  }
  return {};
}

cluster::Json ClusterScaler::scale_out(int tes) {
  cluster::BindModel bind;
  bind.model_path = config_.model_path;
  if (entry_) bind.store_entry = store::entry_name(entry_->key);
  bind.decision_ns = cluster::steady_now_ns();
  cluster::Json out = {{"ok", true}, {"tes", cluster::Json::array()}};
  if (static_cast<int>(pool_.idle()) < tes) {
    out["errors"].push_back("warm pool has " + std::to_string(pool_.idle()) + " idle TEs of " +
                            std::to_string(tes) + " asked for");
  }
  for (Result<cluster::BoundTe>& r : pool_.bind(tes, bind)) {
    Status s = r.ok() ? add_to_jes(r->address) : r.status();
    if (!s.ok()) {
      out["ok"] = false;
      out["errors"].push_back(s.to_string());
      continue;
    }
    metrics_.observe(r->reply.phases);
    cluster::Json event = cluster::scale_out_event(r->name, r->pid, r->address, r->reply);
    if (log_) *log_ << event.dump() << "\n" << std::flush;
    KEEL_LOG_INFO("cluster: scale-out: {} at {} ready in {:.3f} s ({})", r->name, r->address,
                  event["ready_s"].get<double>(),
                  r->reply.from_store ? "model store" : "file: " + r->reply.store_note);
    out["tes"].push_back(std::move(event));
  }
  if (out["tes"].empty()) out["ok"] = false;
  return out;
}

void ClusterScaler::forecast() {
  if (!config_.requests_total || config_.store_dir.empty() || config_.store_budget == 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (last_requests_ >= 0 && now - last_forecast_ < std::chrono::seconds(1)) return;
  const int64_t total = config_.requests_total();
  if (last_requests_ >= 0) {
    const double dt = std::chrono::duration<double>(now - last_forecast_).count();
    rate_ = store::ewma_rate(rate_, static_cast<double>(total - last_requests_) / dt, dt,
                             config_.rate_half_life_s);
  }
  last_requests_ = total;
  last_forecast_ = now;
  PosixFileSystem fs;
  store::ModelStore st({config_.store_dir, config_.store_budget}, &fs);
  Result<store::StoreKey> key = store::key_for_file(fs, config_.model_path, config_.isa);
  if (!key.ok()) return;
  const bool resident = fs.exists(st.path_of(*key));
  store::PreloadSnapshot snap;
  snap.budget_bytes = config_.store_budget;
  snap.min_rate = config_.min_rate;
  snap.models.push_back(
      {config_.model_path, std::filesystem::file_size(config_.model_path), rate_, resident});
  for (const store::PreloadAction& a : store::plan_preloads(snap)) {
    if (a.kind == store::PreloadActionKind::kPreload) {
      Result<store::PreloadResult> r = st.preload(a.model, config_.isa);
      KEEL_LOG_INFO("cluster: forecast {:.2f} req/s: preload {}: {}", rate_, a.model,
                    r.ok() ? r->path : r.status().message());
      if (r.ok() && !r->already_present) {
        entry_ = *r;
        entry_owned_ = true;
      }
    } else {
      KEEL_LOG_INFO("cluster: forecast {:.2f} req/s: evict {}", rate_, a.model);
      (void)st.remove(*key);
    }
  }
}

void ClusterScaler::tick() {
  forecast();
  std::deque<Request> requests;
  {
    std::lock_guard lock(mu_);
    requests.swap(requests_);
  }
  for (Request& req : requests) req.link->reply(req.call_id, scale_out(std::max(1, req.tes)));
  if (!requests.empty() || static_cast<int>(pool_.idle()) < config_.warm_pool) {
    if (Status s = pool_.refill(config_.warm_pool); !s.ok()) {
      KEEL_LOG_WARN("cluster: warm pool refill failed: {}", s.message());
    }
  }
}

void ClusterScaler::shutdown() {
  if (listener_) listener_->stop();
  std::vector<std::shared_ptr<cluster::Link>> links;
  {
    std::lock_guard lock(mu_);
    links.swap(links_);
  }
  for (auto& l : links) l->close();
  if (entry_ && entry_owned_) {
    PosixFileSystem fs;
    store::ModelStore st({config_.store_dir, 0}, &fs);
    const Status s = st.remove(entry_->key);
    KEEL_LOG_INFO("cluster: removed model store entry {}: {}", entry_->path,
                  s.ok() ? "ok" : s.message());
    entry_owned_ = false;
  }
}

}  // namespace keel::cli
