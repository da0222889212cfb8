// `keel cluster up`; see cluster_up.h.
#include "control/up/cluster_up.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <memory>

#include "cluster/gateway/fleet_client.h"
#include "cluster/gateway/fleet_report.h"
#include "control/manager/cluster_membership.h"
#include "control/manager/manager_loop.h"
#include "control/placement/cluster_nodes.h"
#include "control/placement/gang_watch.h"
#include "control/repair/cluster_health.h"
#include "control/up/gateway_server.h"
#include "control/up/up_children.h"
#include "control/up/up_plan.h"
#include "control/up/up_scaling.h"
#include "core/log.h"
#include "gguf/reader.h"
#include "host/engine_host.h"
#include "model/hparams.h"
#include "model/lora_summary.h"
#include "net/port_probe.h"
#include "proc/process_supervisor.h"
#include "proc/ready_line.h"
#include "proc/stop_signals.h"

namespace keel::control {
namespace {

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

RepairConfig repair_config(const ClusterUpOptions& o, const std::vector<std::string>& keel) {
  RepairConfig c;
  c.start_timeout = millis(o.start_timeout_s);
  c.event_log = o.event_log;
  c.keel_command = keel;
  c.warm_pool = o.warm_pool > 0;
  return c;
}

// The gateway's view of --lora NAME=PATH: each adapter read (not run) to list it in /v1/models;
// a file that is not an adapter stops the start-up before any child runs.
Result<std::vector<engine::LoraInfo>> describe_loras(const std::vector<std::string>& specs) {
  std::vector<engine::LoraInfo> out;
  for (const std::string& spec : specs) {  // NAME=PATH, checked by the flag's parser
    const size_t eq = spec.find('=');
    Result<model::LoraSummary> s = model::summarize_lora(spec.substr(eq + 1));
    if (!s.ok()) {
      return Status(s.status().code(), "cannot load LoRA adapter '" + spec.substr(0, eq) +
                                           "': " + s.status().message());
    }
    out.push_back({.name = spec.substr(0, eq),
                   .path = s->path,
                   .rank = s->rank,
                   .targets = s->targets,
                   .created_unix = static_cast<int64_t>(std::time(nullptr))});
  }
  return out;
}

// The gateway's fleet client: with an autoscaler it holds requests while no TE is ready, and a
// fleet that starts with none takes its limits from the flags and the GGUF.
Result<cluster::FleetClientConfig> fleet_config(const ClusterUpOptions& o, const UpTree& tree,
                                                const std::string& path) {
  cluster::FleetClientConfig fc;
  fc.je_addresses = tree.je_addresses;
  if (o.nodes == "auto") fc.event_host = o.serve.host;  // TEs on other hosts stream tokens here
  fc.connect_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.start_timeout_s * 1000));
  // A --nodes auto standby (or a leader that adopted every TE) learns its TEs from the membership.
  if (!autoscaling(o) && o.nodes != "auto") return fc;
  if (autoscaling(o)) {
    fc.activation_timeout =
        std::chrono::milliseconds(static_cast<int64_t>(o.autoscale.activation_timeout_s * 1000));
  }
  if (!tree.te_addresses.empty()) return fc;
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile file,
                        gguf::GgufFile::open(path, {.mode = gguf::DataMode::kNone}));
  KEEL_ASSIGN_OR_RETURN(model::HParams hp, model::parse_hparams(file));
  fc.wait_for_te = false;
  fc.max_model_len =
      o.serve.ctx_size > 0 ? std::min(o.serve.ctx_size, hp.n_ctx_train) : hp.n_ctx_train;
  fc.max_waiting = o.serve.max_waiting;
  return fc;
}

// The --nodes auto checks: etcd, no local warm pool, no Kubernetes scaler.
Status check_nodes(const ClusterUpOptions& o) {
  if (o.nodes != "auto") return {};
  if (o.membership.mode != "etcd") {
    return Status::invalid_argument("--nodes auto needs --membership etcd");
  }
  if (o.warm_pool > 0) {
    return Status::invalid_argument(
        "--nodes auto does not keep a local warm pool (the agents keep their hosts' warm "
        "pools: keel node-agent --warm)");
  }
  if (o.autoscale.scaler == "k8s") {
    return Status::invalid_argument("--nodes auto places TEs through the agents: not --scaler k8s");
  }
  return {};
}

// One run of cluster up. Members are declared in start order, so they are destroyed in reverse:
// the gateway first, the supervisor (which stops whatever still runs) and the membership last.
class ClusterUp {
 public:
  ClusterUp(const ClusterUpOptions& o, const UpHooks& hooks, const sigset_t& stop_signals)
      : o_(o), hooks_(hooks), stop_signals_(stop_signals) {}

  Status run() {
    KEEL_TRY(check_role_autoscaling(o_));  // before the warm pool starts
    // The gateway's port, before any child starts (not after every TE has loaded the model).
    KEEL_TRY(net::probe_listen(o_.serve.host, static_cast<uint16_t>(o_.serve.port)));
    KEEL_TRY(open_model());
    KEEL_TRY(check_nodes(o_));
    KEEL_ASSIGN_OR_RETURN(members_, ClusterMembership::open(o_.membership));
    KEEL_ASSIGN_OR_RETURN(const bool serving, take_role());
    if (!serving) return {};
    KEEL_TRY(start_tree());
    KEEL_TRY(start_gateway());
    if (o_.nodes == "auto") {  // a standby that wins: the TEs taken over, as at start-up
      role_.take_over = [this]() -> Status {
        UpTree taken;
        nodes_->forget();  // what this process managed before is adopted again if it still runs
        return start_remote_tes(*nodes_, members_->session(), o_, path_, name_, te_kinds(o_),
                                threads_per_te(o_), &taken);
      };
      role_.lost = [this] {
        if (gang_watch_) gang_watch_->settle();  // its listing reads the session about to go
        nodes_->forget();
      };
      if (gang_watch_) role_.tick = [this] { gang_watch_->tick(members_->session()); };
    }
    const int sig =
        wait_for_stop(stop_signals_, sup_, scaler_.get(), autoscaler_.get(), replacer_.get(),
                      je_replacer_.get(), *members_, role_, [this]() -> Status {
                        KEEL_TRY(register_tree(*members_, tree_, name_, o_.membership));
                        return register_gateway();
                      });
    return drain_and_stop(sig);
  }

 private:
  // The model's file, its served name, its tokenizer and template (the gateway renders chats)
  // and the LoRA adapters it lists.
  Status open_model() {
    path_ = o_.serve.model_path;
    if (hooks_.resolve_model) {
      ThreadPool pool(1);
      KEEL_ASSIGN_OR_RETURN(path_, hooks_.resolve_model(o_.serve.model_path, pool));
    }
    name_ = hooks_.model_name
                ? hooks_.model_name(o_.serve.served_model_name, o_.serve.model_path, path_)
            : !o_.serve.served_model_name.empty() ? o_.serve.served_model_name
                                                  : std::filesystem::path(path_).stem().string();
    KEEL_ASSIGN_OR_RETURN(meta_, host::EngineHost::open(
                                     path_, {o_.serve.chat_template, o_.serve.chat_template_file}));
    KEEL_ASSIGN_OR_RETURN(loras_, describe_loras(o_.serve.loras));
    return {};
  }

  // Leads, or under --nodes auto serves as a standby while it campaigns. False: stopped while
  // waiting to lead.
  Result<bool> take_role() {
    if (o_.nodes == "auto") {
      KEEL_ASSIGN_OR_RETURN(const bool won, members_->try_lead());
      role_.leading = won;
      if (!won) {
        KEEL_LOG_INFO(
            "cluster: standby manager: serving through its own JEs and gateway; takes the TEs over "
            "when it wins '{}'",
            o_.membership.election);
      }
      return true;
    }
    const Status led = members_->lead(StopCheck{&stop_signals_});
    if (led.code() == StatusCode::kCancelled) {
      KEEL_LOG_INFO("cluster: stopped while waiting to lead");
      return false;
    }
    KEEL_TRY(led);
    role_.leading = true;
    return true;
  }

  // The scaler, the TEs and JEs, their registration, the fleet client, the autoscaler and the
  // replacers.
  Status start_tree() {
    // The scaler preloads the store before any TE starts (under --nodes auto the autoscaler's TEs
    // come from the agents, not a local scaler).
    if (o_.warm_pool > 0 || !o_.store_dir.empty() || (autoscaling(o_) && o_.nodes != "auto")) {
      KEEL_ASSIGN_OR_RETURN(scaler_, start_scaler(sup_, o_, hooks_.keel_command, path_, name_));
    }
    nodes_ = std::make_unique<ClusterNodes>(
        ClusterNodesConfig{.model = name_,
                           .event_log = o_.event_log,
                           .drain_grace = millis(o_.serve.drain_timeout_s),
                           .start_timeout = millis(o_.start_timeout_s),
                           .election = o_.membership.election,
                           .fence = [mp = members_.get()] { return mp->fencing_token(); }});
    Result<UpTree> started = start_children(sup_, o_, hooks_.keel_command, path_, name_, *nodes_,
                                            *members_, role_.leading);
    if (!started.ok()) nodes_->stop_all(std::chrono::milliseconds(5000));
    KEEL_TRY(started.status());
    if (o_.nodes == "auto" && !o_.no_replace) {  // a gang that loses a process is replaced whole
      gang_watch_ = std::make_unique<GangWatch>(nodes_.get(), GangWatchConfig{.model = name_});
    }
    tree_ = std::move(*started);
    if (scaler_) {
      scaler_->set_je_addresses(tree_.je_addresses);
      for (const auto& [pid, address] : tree_.weights_sources) scaler_->add_peer(pid, address);
    }
    KEEL_TRY(register_tree(*members_, tree_, name_, o_.membership));
    KEEL_ASSIGN_OR_RETURN(cluster::FleetClientConfig fc, fleet_config(o_, tree_, path_));
    fc.loras = loras_;
    KEEL_ASSIGN_OR_RETURN(fleet_, cluster::FleetClient::start(fc));
    return start_control();
  }

  // The scaler's request count, the autoscaler and the TE and JE replacers.
  Status start_control() {
    cluster::FleetClient* f = fleet_.get();
    if (scaler_) {
      scaler_->set_requests_total([f] {
        const engine::MetricsSnapshot m = f->metrics();
        int64_t total = 0;
        for (int64_t n : m.request_finished_total) total += n;
        return total;
      });
    }
    if (autoscaling(o_)) {
      KEEL_ASSIGN_OR_RETURN(
          autoscaler_, start_autoscaler(o_, tree_.je_addresses, path_, name_, sup_, scaler_.get(),
                                        f, *nodes_, members_.get()));
    }
    const RepairConfig repair = repair_config(o_, hooks_.keel_command);
    if (!o_.no_replace && o_.nodes != "auto") {  // remote TEs leave through the membership
      KEEL_ASSIGN_OR_RETURN(
          replacer_, start_replacer(sup_, repair, tree_.tes, tree_.je_addresses, f, scaler_.get()));
    }
    if (!o_.no_replace) {  // a JE that exits is restarted in place
      KEEL_ASSIGN_OR_RETURN(je_replacer_,
                            start_je_replacer(sup_, repair, tree_.jes, f, replacer_.get()));
    }
    return {};
  }

  // The gateway's /metrics beyond the fleet's engines: the fleet's TEs, the hops, the manager's
  // role and each control loop's counters.
  std::function<std::string()> extra_metrics() const {
    cluster::FleetClient* f = fleet_.get();
    ClusterScaler* sc = scaler_.get();
    ClusterAutoscaler* as = autoscaler_.get();
    TeReplacer* rp = replacer_.get();
    JeReplacer* jp = je_replacer_.get();
    ClusterNodes* np = o_.nodes == "auto" ? nodes_.get() : nullptr;
    GangWatch* gw = gang_watch_.get();
    const ManagerRole* mr = &role_;
    const ClusterMembership* mm = members_.get();
    return [f, name = name_, sc, as, rp, jp, np, gw, mr, mm]() -> std::string {
      Result<cluster::FleetStatus> s = f->fleet_status();
      std::string text = s.ok() ? cluster::fleet_metrics_text(*s, name) : std::string();
      text += f->hop_metrics_text();
      text += mr->metrics_text(mm->fencing_token());
      if (np != nullptr) text += np->metrics_text();
      if (gw != nullptr) text += gw->metrics_text();
      if (sc != nullptr) text += sc->metrics_text();
      if (rp != nullptr) text += rp->metrics_text();
      if (jp != nullptr) text += jp->metrics_text();
      return as != nullptr ? text + as->metrics_text() : text;
    };
  }

  // The OpenAI server over the fleet, registered in the membership; prints the ready line.
  Status start_gateway() {
    KEEL_ASSIGN_OR_RETURN(server::ServerDeps deps,
                          gateway_deps(fleet_.get(), *meta_, o_.serve.reasoning_parser, name_));
    deps.extra_metrics = extra_metrics();
    server::ServerConfig c = hooks_.gateway;
    c.served_model_name = name_;
    // The LoRA routes reach the FleetClient, which refuses run-time loads (400 naming --lora).
    c.allow_runtime_lora = true;
    KEEL_ASSIGN_OR_RETURN(server_, server::Server::start(c, std::move(deps)));
    KEEL_LOG_INFO("ready: gateway on http://{}:{} (model '{}')", c.host, server_->port(), name_);
    gateway_address_ = c.host + ":" + std::to_string(server_->port());
    KEEL_TRY(register_gateway());
    nlohmann::json ready = {{"role", "gateway"},
                            {"port", server_->port()},
                            {"pid", getpid()},
                            {"manager", role_.leading ? "leader" : "standby"}};
    if (scaler_) ready["control_port"] = scaler_->control_port();
    return proc::print_ready_line(ready);
  }

  Status register_gateway() {
    return members_->add(membership::MemberKind::kGateway, "gateway-" + members_->manager_id(),
                         gateway_address_, {{"model", name_}});
  }

  // The gateway drains, then the JEs and TEs stop in order; a --nodes auto manager that is not
  // the confirmed leader leaves its TEs to the one that is.
  Status drain_and_stop(int sig) {
    KEEL_LOG_INFO("cluster: {}: draining (up to {:.1f} s)", proc::signal_name(sig),
                  o_.serve.drain_timeout_s);
    server_->stop_accepting();
    fleet_->drain(millis(o_.serve.drain_timeout_s));
    server_->shutdown();
    fleet_->stop();
    std::vector<std::string> order = tree_.je_names;
    order.insert(order.end(), tree_.te_names.begin(), tree_.te_names.end());
    KEEL_TRY(sup_.stop_all_in_order(order, std::chrono::milliseconds(10000)).status());
    if (o_.nodes == "auto" && !members_->confirmed_leader()) {
      KEEL_LOG_INFO("cluster: not the confirmed leader: the TEs are left to the one that leads");
      nodes_->forget();
    }
    nodes_->stop_all(std::chrono::milliseconds(3000));
    if (scaler_) scaler_->shutdown();             // after the TEs that mapped its entry
    if (Status s = members_->close(); !s.ok()) {  // every member registered here vanishes now
      KEEL_LOG_WARN("cluster: membership not closed ({}); its members vanish after the TTL",
                    s.to_string());
    }
    KEEL_LOG_INFO("cluster: stopped");
    return {};
  }

  const ClusterUpOptions& o_;
  const UpHooks& hooks_;
  const sigset_t& stop_signals_;
  std::string path_, name_, gateway_address_;
  std::unique_ptr<host::EngineHost> meta_;
  std::vector<engine::LoraInfo> loras_;
  std::unique_ptr<ClusterMembership> members_;
  ManagerRole role_;
  proc::ProcessSupervisor sup_;            // its destructor stops whatever is still running
  std::unique_ptr<ClusterScaler> scaler_;  // preloads the store before any TE starts
  std::unique_ptr<ClusterNodes> nodes_;    // --nodes auto: the TEs through node agents
  std::unique_ptr<GangWatch> gang_watch_;  // --nodes auto: lost gangs replaced whole
  UpTree tree_;
  std::unique_ptr<cluster::FleetClient> fleet_;
  std::unique_ptr<ClusterAutoscaler> autoscaler_;
  std::unique_ptr<TeReplacer> replacer_;
  std::unique_ptr<JeReplacer> je_replacer_;
  std::unique_ptr<server::Server> server_;
};

}  // namespace

Status run_cluster_up(const ClusterUpOptions& o, const UpHooks& hooks,
                      const sigset_t& stop_signals) {
  ClusterUp up(o, hooks, stop_signals);
  return up.run();
}

}  // namespace keel::control
