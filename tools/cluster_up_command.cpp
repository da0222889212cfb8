// `keel cluster up`: the whole tree on one machine. Task executors (`keel te`) start first, each a
// child process with its share of the cores; then the job executors (`keel je`), given every TE's
// address; then the gateway — keel's OpenAI server with a FleetClient as its engine — in this
// process. Each child prints its port on a KEEL_READY line (children bind port 0); a child that
// does not start in time stops the whole start-up. On SIGTERM/SIGINT the tree drains in order:
// the gateway stops accepting and lets in-flight requests finish (--drain-timeout), then the JEs
// stop, then the TEs. Children are stopped by PID and die with this process (PR_SET_PDEATHSIG).
// Before any of it, the process joins the membership (--membership embedded|etcd) and campaigns
// to lead the "cluster-manager" election (a standby waits there); it registers the JEs, TEs and
// the gateway it starts, and revokes them all at shutdown (tools/cluster_membership.h). With
// --nodes auto a standby does not wait idle: it starts its JEs (they follow the TEs in the
// membership) and its gateway and serves, and when it wins the election it takes the TEs over
// (ClusterNodes::take_over: the live ones adopted, the missing ones started through the agents).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <thread>

#include "builtin_models.h"
#include "cluster/gateway/fleet_client.h"
#include "cluster/gateway/fleet_report.h"
#include "cluster/protocol/executor_launch.h"
#include "cluster_commands.h"
#include "cluster_up_plan.h"
#include "control/autoscale/cluster_autoscaler.h"
#include "control/manager/cluster_membership.h"
#include "control/manager/manager_loop.h"
#include "control/placement/cluster_nodes.h"
#include "control/repair/cluster_health.h"
#include "control/scaleout/cluster_scaler.h"
#include "core/cpu_features.h"
#include "core/file_system.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "gguf/reader.h"
#include "host/engine_host.h"
#include "http_front_flags.h"
#include "kernels/kernels.h"
#include "model/hparams.h"
#include "model/lora_summary.h"
#include "net/port_probe.h"
#include "proc/process_supervisor.h"
#include "proc/ready_line.h"
#include "self_exe.h"
#include "semi_pd_flags.h"
#include "server/chat_formatter.h"
#include "server/server.h"
#include "state_flags.h"
#include "stop_signals.h"

namespace keel::cli {
namespace {

using control::AutoscaleGroupConfig;
using control::ClusterAutoscaler;
using control::ClusterAutoscalerConfig;
using control::ClusterMembership;
using control::ClusterNodes;
using control::ClusterScaler;
using control::ClusterScalerConfig;
using control::GangStart;
using control::kNotATe;
using control::ManagerRole;
using control::ModelGangs;
using control::RemoteTe;
using control::StartedTes;
using control::StopCheck;

control::RepairConfig repair_config(const ClusterUpOptions& o) {
  control::RepairConfig c;
  c.start_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.start_timeout_s * 1000));
  c.event_log = o.event_log;
  c.keel_command = {self_exe()};
  c.warm_pool = o.warm_pool > 0;
  return c;
}

std::chrono::milliseconds start_timeout(const ClusterUpOptions& o) {
  return std::chrono::milliseconds(static_cast<int64_t>(o.start_timeout_s * 1000));
}

// Starts one child and returns "127.0.0.1:<its port>".
// *child (optional): the started child, with its ready line.
Result<std::string> spawn(proc::ProcessSupervisor& sup, proc::ChildSpec spec,
                          proc::Child* child_out = nullptr) {
  KEEL_ASSIGN_OR_RETURN(proc::Child child, sup.spawn(spec));
  KEEL_ASSIGN_OR_RETURN(int port, proc::ready_port(child.ready));
  if (child_out != nullptr) *child_out = child;
  return "127.0.0.1:" + std::to_string(port);
}

struct Tree {
  std::vector<std::string> te_names, je_names, te_addresses, je_addresses;
  StartedTes tes;                       // for the replacer
  std::vector<cluster::ManagedJe> jes;  // for the JE replacer
  // Started TEs that mapped the store entry and serve it (fork sources): pid, weights service.
  std::vector<std::pair<pid_t, std::string>> weights_sources;
};

// The scale-out side (--warm-pool): preload into the store, the warm pool, the control port.
Result<std::unique_ptr<ClusterScaler>> start_scaler(proc::ProcessSupervisor& sup,
                                                    const ClusterUpOptions& o,
                                                    const std::string& path,
                                                    const std::string& name) {
  ClusterScalerConfig c;
  c.warm_pool = o.warm_pool;
  c.store_dir = o.store_dir;
  c.store_budget = o.store_budget;
  c.rate_half_life_s = o.forecast_half_life_s;
  c.min_rate = o.forecast_min_rate;
  c.event_log = o.event_log;
  c.keel_command = {self_exe()};
  c.warm_te = warm_te_spec(o, path, name, threads_per_te(o));
  c.model_path = path;
  for (const auto role : {cluster::TeRole::kPrefill, cluster::TeRole::kDecode}) {
    c.role_engine[role] = te_engine_spec(o, std::string(cluster::te_role_name(role)));
  }
  c.bind_source =
      cluster::parse_bind_source_mode(o.bind_source).value_or(cluster::BindSourceMode::kAuto);
  c.te_store_root = o.te_stores;
  KEEL_ASSIGN_OR_RETURN(kernels::Isa isa,
                        o.serve.compute.isa.empty()
                            ? kernels::choose_isa_from_env(detect_cpu_features())
                            : kernels::choose_isa(detect_cpu_features(), o.serve.compute.isa));
  c.isa = std::string(kernels::isa_name(isa));
  c.start_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.start_timeout_s * 1000));
  return ClusterScaler::start(&sup, std::move(c));
}

// Whether a TE of `model` is registered in the membership now (a previous leader's).
Result<bool> model_has_tes(membership::Membership& session, const std::string& model) {
  KEEL_ASSIGN_OR_RETURN(std::vector<membership::Member> members, session.list());
  return std::any_of(members.begin(), members.end(), [&](const membership::Member& m) {
    const auto it = m.attributes.find("model");
    return m.kind == membership::MemberKind::kTaskExecutor && it != m.attributes.end() &&
           it->second == model;
  });
}

// --nodes auto: the TEs through the node agents in the membership, not forked here. With none of
// the model registered, each instance is placed as a gang (cluster_nodes.h, model_gangs); those
// still registered (a previous leader's) are adopted and only the missing ones started (one by
// one, cluster/policy/placement.h). TE and instance ids carry the model's name, so several models'
// managers share the agents.
Status start_remote_tes(ClusterNodes& nodes, membership::Membership& session,
                        const ClusterUpOptions& o, const std::string& path, const std::string& name,
                        const std::vector<std::string>& kinds, int threads, Tree* t) {
  KEEL_TRY(nodes.announce(session));  // the agents refuse an earlier leader's commands from now
  const int64_t memory = te_memory_bytes(o, path);
  std::vector<cluster::StartTe> starts;
  for (size_t i = 0; i < kinds.size(); ++i) {
    const std::string role = kinds[i] == "semi-pd" ? "colocated" : kinds[i];  // semi-PD's role
    cluster::StartTe s{
        name + "-te-" + std::to_string(i), path, name, role, threads, o.serve.compute.isa,
        te_engine_spec(o, kinds[i])};
    s.memory_bytes = memory;
    starts.push_back(std::move(s));
  }
  KEEL_ASSIGN_OR_RETURN(const bool registered, model_has_tes(session, name));
  if (!registered) {  // nothing to adopt: every instance placed as a gang
    const ModelGangs g = control::model_gangs(name, o.priority, starts);
    KEEL_ASSIGN_OR_RETURN(std::vector<RemoteTe> tes, nodes.start_gangs(session, g.gangs));
    t->te_addresses.assign(kinds.size(), "");
    size_t next = 0;
    for (const std::vector<size_t>& gang : g.index) {
      for (size_t i : gang) {
        const RemoteTe& te = tes[next++];
        if (i != kNotATe) t->te_addresses[i] = te.address;  // a stage 1 is not a TE
      }
    }
    return {};
  }
  size_t adopted = 0;
  KEEL_ASSIGN_OR_RETURN(std::vector<RemoteTe> tes,
                        nodes.take_over(session, name, std::move(starts), o.priority, &adopted));
  std::erase_if(tes, [](const RemoteTe& te) { return te.role == cluster::kPpStageRole; });
  for (const RemoteTe& te : tes) t->te_addresses.push_back(te.address);
  KEEL_LOG_INFO("cluster: managing {} TEs through the node agents ({} adopted, {} started)",
                tes.size(), adopted, tes.size() - adopted);
  return {};
}

// `leading` false: a --nodes auto standby — its JEs only (they follow the TEs in the membership).
Result<Tree> start_children(proc::ProcessSupervisor& sup, const ClusterUpOptions& o,
                            const std::string& path, const std::string& name, ClusterNodes& nodes,
                            ClusterMembership& members, bool leading) {
  Tree t;
  const int colocated = colocated_tes(o);
  const int total = initial_tes(o);
  if (total == 0 && !autoscaling(o))
    return Status::invalid_argument("cluster up: no task executors asked for");
  if (o.autoscale.scaler == "k8s" && !autoscaling(o)) {
    return Status::invalid_argument("cluster up: --scaler k8s needs the autoscaler (--max N)");
  }
  if ((o.prefill > 0) != (o.decode > 0)) {
    return Status::invalid_argument("cluster up: --prefill and --decode go together");
  }
  if (o.serve.semi_pd_dynamic && o.semi_pd == 0) {
    return Status::invalid_argument("cluster up: --semi-pd-dynamic needs --semi-pd N");
  }
  KEEL_TRY(check_pipelined(o));
  const int threads = threads_per_te(o);
  const std::vector<std::string> kinds = te_kinds(o);
  std::vector<std::string> roles;  // a semi-PD TE's role is colocated
  for (const std::string& k : kinds) roles.push_back(k == "semi-pd" ? "colocated" : k);
  if (o.nodes == "auto" && leading) {  // the TEs run on the agents' hosts; the JEs here
    KEEL_TRY(start_remote_tes(nodes, members.session(), o, path, name, kinds, threads, &t));
  }
  for (int i = 0; i < total && o.nodes != "auto"; ++i) {
    cluster::TeSpec spec = te_spec(o, path, name, i, threads, kinds[i]);
    t.te_names.push_back(spec.id);
    proc::Child child;
    KEEL_ASSIGN_OR_RETURN(
        std::string address,
        spawn(sup, cluster::te_child({self_exe()}, spec, start_timeout(o)), &child));
    t.te_addresses.push_back(address);
    const int weights_port = child.ready.value("weights_port", 0);
    if (child.ready.value("from_store", false) && weights_port > 0) {
      t.weights_sources.emplace_back(child.pid, "127.0.0.1:" + std::to_string(weights_port));
    }
    t.tes.specs.push_back(std::move(spec));
  }
  t.tes.names = t.te_names;
  t.tes.roles = roles;
  t.tes.addresses = t.te_addresses;
  std::vector<std::string> tes;
  for (const std::string& a : t.te_addresses) {
    if (!a.empty()) tes.push_back(a);
  }
  for (int i = 0; i < o.jes; ++i) {
    t.je_names.push_back(je_id(o, name, i, members.manager_id()));
    cluster::JeSpec spec = je_spec(o, path, name, t.je_names.back(), tes);
    proc::Child child;
    KEEL_ASSIGN_OR_RETURN(
        std::string address,
        spawn(sup, cluster::je_child({self_exe()}, spec, start_timeout(o)), &child));
    t.je_addresses.push_back(address);
    t.jes.push_back({t.je_names.back(), address, child.pid, {self_exe()}, std::move(spec)});
  }
  KEEL_LOG_INFO(
      "cluster: {} colocated, {} semi-PD (split {}), {} prefill, {} decode TEs ({} threads each), "
      "{} JEs",
      colocated, o.semi_pd, o.serve.semi_pd_split, o.prefill, o.decode, threads, o.jes);
  if (colocated + o.semi_pd > 0 && o.prefill > 0 && o.pd_heatmap.empty()) {
    KEEL_LOG_INFO(
        "cluster: no --pd-heatmap: each prefill/decode pair is one more replica beside the "
        "colocated TEs (locality when loads are balanced, else least load; a pair's load is its "
        "prefill and decode TEs'); keel cluster profile-pd measures a heatmap");
  }
  return t;
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

server::ServerConfig gateway_config(const ClusterUpOptions& o, const std::string& name) {
  server::ServerConfig c;
  c.host = o.serve.host;
  c.port = o.serve.port;
  c.api_key = o.serve.api_key;
  c.served_model_name = name;
  apply_http_front(o.serve, raise_descriptor_limit(), &c);
  c.pic_mode = o.serve.pic;
  // The LoRA routes reach the FleetClient, which refuses run-time loads (400 naming --lora).
  c.allow_runtime_lora = true;
  c.state_dir = serve_state_dir(o.serve);
  return c;
}

// The gateway's fleet client: with an autoscaler it holds requests while no TE is ready, and a
// fleet that starts with none takes its limits from the flags and the GGUF.
Result<cluster::FleetClientConfig> fleet_config(const ClusterUpOptions& o, const Tree& tree,
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

// --nodes auto: the autoscaler's scale-outs placed through the agents (each TE a gang of one, or
// of two with its stage 1 under --pp 2, `<model>-te-<manager id>-s<k>`; after one that does not
// fit, none for 2 s), its drained TEs stopped through them (a stage 1 exits with its stage 0).
void scale_through_agents(ClusterNodes& nodes, ClusterMembership* members,
                          const ClusterUpOptions& o, const std::string& path,
                          const std::string& name, ClusterAutoscalerConfig* c) {
  auto next = std::make_shared<int>(0);
  // After a scale-out that did not fit, the next try waits (the decision repeats every tick).
  auto retry_at = std::make_shared<std::chrono::steady_clock::time_point>();
  c->start_remote = [&nodes, members, &o, path, name, next, retry_at](
                        int32_t n, cluster::TeRole te_role) -> Result<std::vector<std::string>> {
    const std::string role(cluster::te_role_name(te_role));
    if (std::chrono::steady_clock::now() < *retry_at) return std::vector<std::string>{};
    const std::string manager = members->manager_id();
    std::vector<std::string> out;
    Status last;
    for (int32_t k = 0; k < n; ++k) {
      const std::string id = name + "-te-" + manager + "-s" + std::to_string((*next)++);
      cluster::StartTe s{
          id, path, name, role, threads_per_te(o), o.serve.compute.isa, te_engine_spec(o, role)};
      s.memory_bytes = te_memory_bytes(o, path);
      GangStart gang{id, o.priority, {s}};
      // A pipelined TE goes with its stage 1, started first (it exits with its stage 0).
      if (control::pipelined(s)) gang.tes.insert(gang.tes.begin(), control::stage_start(s));
      Result<std::vector<RemoteTe>> tes = nodes.start_gang(members->session(), gang);
      if (!tes.ok()) {
        last = tes.status();
        break;  // the hosts are full: later ones would not fit either
      }
      for (const RemoteTe& te : *tes) {
        if (te.role != cluster::kPpStageRole) out.push_back(te.address);
      }
    }
    if (!last.ok()) *retry_at = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    if (out.empty() && !last.ok()) return last;
    return out;
  };
  c->stop_remote = [&nodes](const std::string& id, std::chrono::milliseconds grace) {
    return nodes.stop_te(id, grace);
  };
}

// The autoscaler's groups: colocated (--max), prefill (--max-prefill: the TTFT objective its
// signal) and decode (--max-decode: the TPOT one), each whose max is > 0.
std::vector<AutoscaleGroupConfig> autoscale_groups(const AutoscaleOptions& a) {
  cluster::autoscale::AutoscalerConfig base;
  base.target_concurrency = a.target_concurrency;
  base.stable_window_s = a.stable_window_s;
  base.panic_window_s = a.panic_window_s > 0 ? a.panic_window_s : a.stable_window_s / 10;
  base.scale_down_delay_s = a.scale_down_delay_s;
  base.scale_to_zero_grace_s = a.scale_to_zero_grace_s;
  base.ttft_slo_s = a.ttft_slo_ms / 1000.0;
  base.tpot_slo_s = a.tpot_slo_ms / 1000.0;
  std::vector<AutoscaleGroupConfig> groups;
  const auto add = [&](cluster::TeRole role, int32_t min, int32_t max, double target) {
    if (max <= 0) return;
    AutoscaleGroupConfig g{role, base};
    g.policy.min_replicas = min;
    g.policy.max_replicas = max;
    if (target > 0) g.policy.target_concurrency = target;
    if (role == cluster::TeRole::kPrefill) g.policy.tpot_slo_s = 0;  // no token after the first
    if (role == cluster::TeRole::kDecode) g.policy.ttft_slo_s = 0;   // the first came from prefill
    groups.push_back(g);
  };
  add(cluster::TeRole::kColocated, a.min_replicas, a.max_replicas, 0);
  add(cluster::TeRole::kPrefill, a.min_prefill, a.max_prefill, a.prefill_target_concurrency);
  add(cluster::TeRole::kDecode, a.min_decode, a.max_decode, a.decode_target_concurrency);
  return groups;
}

Result<std::unique_ptr<ClusterAutoscaler>> start_autoscaler(
    const ClusterUpOptions& o, const Tree& tree, const std::string& path, const std::string& name,
    proc::ProcessSupervisor& sup, ClusterScaler* scaler, cluster::FleetClient* fleet,
    ClusterNodes& nodes, ClusterMembership* members) {
  const AutoscaleOptions& a = o.autoscale;
  ClusterAutoscalerConfig c;
  c.groups = autoscale_groups(o.autoscale);
  c.model = name;
  c.drain_timeout = std::chrono::milliseconds(static_cast<int64_t>(a.drain_timeout_s * 1000));
  c.je_addresses = tree.je_addresses;
  c.event_log = o.event_log;
  if (o.nodes == "auto") scale_through_agents(nodes, members, o, path, name, &c);
  std::unique_ptr<kube::ReplicaActuator> actuator;
  if (a.scaler == "k8s") {
    kube::KubeConfigOverrides k{a.k8s_api, a.k8s_token_file, a.k8s_namespace};
    KEEL_ASSIGN_OR_RETURN(actuator, kube::open_replica_actuator(k, a.k8s_deployment));
    KEEL_LOG_INFO("cluster: autoscaler sets the replicas of deployment {} (now {})",
                  a.k8s_deployment, *actuator->known_replicas());
  } else if (o.warm_pool == 0) {
    KEEL_LOG_INFO("cluster: --max without --warm-pool: each scale-out cold-starts its TEs");
  }
  return ClusterAutoscaler::start(std::move(c), &sup, scaler, fleet, std::move(actuator));
}

// Registers the started JEs and TEs in the membership, on their behalf (embedded mode: with etcd
// they register themselves).
Status register_tree(ClusterMembership& members, const Tree& tree, const std::string& name,
                     const MembershipOptions& o) {
  if (o.mode == "etcd") return {};
  for (size_t i = 0; i < tree.je_names.size(); ++i) {
    KEEL_TRY(members.add(membership::MemberKind::kJobExecutor, tree.je_names[i],
                         tree.je_addresses[i], {{"model", name}}));
  }
  for (size_t i = 0; i < tree.te_names.size(); ++i) {
    KEEL_TRY(members.add(membership::MemberKind::kTaskExecutor, tree.te_names[i],
                         tree.te_addresses[i], {{"model", name}, {"role", tree.tes.roles[i]}}));
  }
  return {};
}

Status cluster_up(const ClusterUpOptions& o, const sigset_t& stop_signals) {
  KEEL_TRY(check_role_autoscaling(o));  // before the warm pool starts
  // The gateway's port, before any child starts (not after every TE has loaded the model).
  KEEL_TRY(net::probe_listen(o.serve.host, static_cast<uint16_t>(o.serve.port)));
  std::string path = o.serve.model_path;
  {
    ThreadPool pool(1);
    KEEL_ASSIGN_OR_RETURN(path, resolve_model_path(o.serve.model_path, pool));
  }
  const std::string name = served_model_name(o.serve.served_model_name, o.serve.model_path, path);
  KEEL_ASSIGN_OR_RETURN(
      std::unique_ptr<host::EngineHost> meta,
      host::EngineHost::open(path, {o.serve.chat_template, o.serve.chat_template_file}));
  KEEL_ASSIGN_OR_RETURN(std::vector<engine::LoraInfo> loras, describe_loras(o.serve.loras));

  if (o.nodes == "auto") {
    if (o.membership.mode != "etcd") {
      return Status::invalid_argument("--nodes auto needs --membership etcd");
    }
    if (o.warm_pool > 0) {
      return Status::invalid_argument(
          "--nodes auto does not keep a local warm pool (the agents keep their hosts' warm "
          "pools: keel node-agent --warm)");
    }
    if (o.autoscale.scaler == "k8s") {
      return Status::invalid_argument(
          "--nodes auto places TEs through the agents: not --scaler k8s");
    }
  }
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<ClusterMembership> members,
                        ClusterMembership::open(o.membership));
  ManagerRole role;
  if (o.nodes == "auto") {  // a standby serves while it waits (wait_for_stop campaigns)
    KEEL_ASSIGN_OR_RETURN(bool won, members->try_lead());
    role.leading = won;
    if (!won) {
      KEEL_LOG_INFO(
          "cluster: standby manager: serving through its own JEs and gateway; takes the "
          "TEs over when it wins '{}'",
          o.membership.election);
    }
  } else {
    const Status led = members->lead(StopCheck{&stop_signals});
    if (led.code() == StatusCode::kCancelled) {
      KEEL_LOG_INFO("cluster: stopped while waiting to lead");
      return {};
    }
    KEEL_TRY(led);
    role.leading = true;
  }

  proc::ProcessSupervisor sup;            // its destructor stops whatever is still running
  std::unique_ptr<ClusterScaler> scaler;  // preloads the store before any TE starts
  // (Under --nodes auto the autoscaler's TEs come from the agents, not a local scaler.)
  if (o.warm_pool > 0 || !o.store_dir.empty() || (autoscaling(o) && o.nodes != "auto")) {
    KEEL_ASSIGN_OR_RETURN(scaler, start_scaler(sup, o, path, name));
  }
  // --nodes auto: the TEs started through node agents, placed as gangs.
  ClusterNodes nodes(
      {.model = name,
       .event_log = o.event_log,
       .drain_grace =
           std::chrono::milliseconds(static_cast<int64_t>(o.serve.drain_timeout_s * 1000)),
       .start_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.start_timeout_s * 1000)),
       .election = o.membership.election,
       .fence = [mp = members.get()] { return mp->fencing_token(); }});
  Result<Tree> started = start_children(sup, o, path, name, nodes, *members, role.leading);
  if (!started.ok()) nodes.stop_all(std::chrono::milliseconds(5000));
  KEEL_TRY(started.status());
  Tree tree = std::move(*started);
  if (scaler) {
    scaler->set_je_addresses(tree.je_addresses);
    for (const auto& [pid, address] : tree.weights_sources) scaler->add_peer(pid, address);
  }
  KEEL_TRY(register_tree(*members, tree, name, o.membership));
  KEEL_ASSIGN_OR_RETURN(cluster::FleetClientConfig fc, fleet_config(o, tree, path));
  fc.loras = std::move(loras);
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<cluster::FleetClient> fleet,
                        cluster::FleetClient::start(fc));
  cluster::FleetClient* f = fleet.get();
  if (scaler) {
    scaler->set_requests_total([f] {
      const engine::MetricsSnapshot m = f->metrics();
      int64_t total = 0;
      for (int64_t n : m.request_finished_total) total += n;
      return total;
    });
  }
  std::unique_ptr<ClusterAutoscaler> autoscaler;
  if (autoscaling(o)) {
    KEEL_ASSIGN_OR_RETURN(autoscaler, start_autoscaler(o, tree, path, name, sup, scaler.get(),
                                                       fleet.get(), nodes, members.get()));
  }
  std::unique_ptr<control::TeReplacer> replacer;
  if (!o.no_replace && o.nodes != "auto") {  // remote TEs leave through the membership
    KEEL_ASSIGN_OR_RETURN(replacer, control::start_replacer(sup, repair_config(o), tree.tes,
                                                            tree.je_addresses, f, scaler.get()));
  }
  std::unique_ptr<control::JeReplacer> je_replacer;  // a JE that exits is restarted in place
  if (!o.no_replace) {
    KEEL_ASSIGN_OR_RETURN(je_replacer, control::start_je_replacer(sup, repair_config(o), tree.jes,
                                                                  f, replacer.get()));
  }
  server::ServerDeps deps{
      fleet.get(), &meta->tokenizer(),
      server::template_chat_formatter(meta->chat_template(), &meta->tokenizer()), nullptr};
  deps.tool_format = server::detect_tool_format(meta->chat_template()->source());
  KEEL_ASSIGN_OR_RETURN(deps.reasoning_parser,
                        server::parse_reasoning_parser(o.serve.reasoning_parser));
  ClusterScaler* sc = scaler.get();
  ClusterAutoscaler* as = autoscaler.get();
  control::TeReplacer* rp = replacer.get();
  control::JeReplacer* jp = je_replacer.get();
  ClusterNodes* np = o.nodes == "auto" ? &nodes : nullptr;
  const ManagerRole* mr = &role;
  const ClusterMembership* mm = members.get();
  deps.extra_metrics = [f, name, sc, as, rp, jp, np, mr, mm]() -> std::string {
    Result<cluster::FleetStatus> s = f->fleet_status();
    std::string text = s.ok() ? cluster::fleet_metrics_text(*s, name) : std::string();
    text += f->hop_metrics_text();
    text += mr->metrics_text(mm->fencing_token());
    if (np != nullptr) text += np->metrics_text();
    if (sc != nullptr) text += sc->metrics_text();
    if (rp != nullptr) text += rp->metrics_text();
    if (jp != nullptr) text += jp->metrics_text();
    return as != nullptr ? text + as->metrics_text() : text;
  };
  deps.fleet_health = [f, name] { return control::fleet_health(*f, name); };
  deps.cluster_status = [f]() -> Result<std::string> {
    KEEL_ASSIGN_OR_RETURN(cluster::FleetStatus s, f->fleet_status());
    return cluster::fleet_status_json(s).dump();
  };
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<server::Server> srv,
                        server::Server::start(gateway_config(o, name), std::move(deps)));
  KEEL_LOG_INFO("ready: gateway on http://{}:{} (model '{}')", o.serve.host, srv->port(), name);
  ClusterMembership* mp = members.get();
  const std::string gateway_address = o.serve.host + ":" + std::to_string(srv->port());
  const auto register_gateway = [mp, gateway_address, name]() -> Status {
    return mp->add(membership::MemberKind::kGateway, "gateway-" + mp->manager_id(), gateway_address,
                   {{"model", name}});
  };
  KEEL_TRY(register_gateway());
  nlohmann::json ready = {{"role", "gateway"},
                          {"port", srv->port()},
                          {"pid", getpid()},
                          {"manager", role.leading ? "leader" : "standby"}};
  if (scaler) ready["control_port"] = scaler->control_port();
  KEEL_TRY(proc::print_ready_line(ready));

  // A --nodes auto standby that wins: the TEs taken over (adopted or started), as at start-up.
  if (o.nodes == "auto") {
    role.take_over = [&]() -> Status {
      Tree taken;
      nodes.forget();  // what this process managed before is adopted again if it still runs
      return start_remote_tes(nodes, members->session(), o, path, name, te_kinds(o),
                              threads_per_te(o), &taken);
    };
    role.lost = [&nodes] { nodes.forget(); };
  }
  const int sig =
      control::wait_for_stop(stop_signals, sup, scaler.get(), autoscaler.get(), replacer.get(),
                             je_replacer.get(), *members, role, [&]() -> Status {
                               KEEL_TRY(register_tree(*members, tree, name, o.membership));
                               return register_gateway();
                             });
  KEEL_LOG_INFO("cluster: {}: draining (up to {:.1f} s)", signal_name(sig),
                o.serve.drain_timeout_s);
  srv->stop_accepting();
  fleet->drain(std::chrono::milliseconds(static_cast<int64_t>(o.serve.drain_timeout_s * 1000)));
  srv->shutdown();
  fleet->stop();
  std::vector<std::string> order = tree.je_names;
  order.insert(order.end(), tree.te_names.begin(), tree.te_names.end());
  KEEL_TRY(sup.stop_all_in_order(order, std::chrono::milliseconds(10000)).status());
  if (o.nodes == "auto" && !members->confirmed_leader()) {
    KEEL_LOG_INFO("cluster: not the confirmed leader: the TEs are left to the one that leads");
    nodes.forget();
  }
  nodes.stop_all(std::chrono::milliseconds(3000));
  if (scaler) scaler->shutdown();              // after the TEs that mapped its entry
  if (Status s = members->close(); !s.ok()) {  // every member registered here vanishes now
    KEEL_LOG_WARN("cluster: membership not closed ({}); its members vanish after the TTL",
                  s.to_string());
  }
  KEEL_LOG_INFO("cluster: stopped");
  return {};
}

}  // namespace

int run_cluster_up(const ClusterUpOptions& opts) {
  const sigset_t stop_signals = block_stop_signals();
  spdlog::set_level(spdlog::level::info);
  const Status s = cluster_up(opts, stop_signals);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
