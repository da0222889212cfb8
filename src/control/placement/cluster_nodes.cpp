// ClusterNodes; see cluster_nodes.h.
#include "control/placement/cluster_nodes.h"

#include <algorithm>
#include <ctime>
#include <fstream>
#include <map>
#include <thread>

#include "cluster/policy/gang_placement.h"
#include "cluster/policy/placement.h"
#include "cluster/policy/takeover_plan.h"
#include "cluster/protocol/messages.h"
#include "core/log.h"
#include "net/host_port.h"

namespace keel::control {
namespace {

// The fence call's bound per agent, connect and reply each (announce).
constexpr std::chrono::milliseconds kAnnounceTimeout{1000};

// The hosts as gang placement sees them: each agent's declared room and its TEs, idle as the JEs
// report them (a TE no JE reports counts as busy).
template <typename Use>
std::vector<cluster::GangHost> gang_hosts(const std::vector<cluster::NodeCapacity>& nodes,
                                          const Use& use) {
  std::vector<cluster::GangHost> out;
  for (const cluster::NodeCapacity& n : nodes) {
    cluster::GangHost h;
    h.host_id = n.host_id;
    h.cores = n.cores;
    h.memory_bytes = n.memory_total_bytes;
    h.max_processes = n.max_tes;
    for (const cluster::HostedTe& t : n.tes) {
      const auto u = use.find(t.id);
      cluster::HostedProcess p{t.id,      t.instance,     t.priority,
                               t.threads, t.memory_bytes, u != use.end() && u->second.idle};
      p.follows_instance = !is_te_role(t.role);  // a stage or member: idle as its TE is
      h.running.push_back(std::move(p));
    }
    out.push_back(std::move(h));
  }
  return out;
}

cluster::GangRequest gang_request(const GangStart& g) {
  cluster::GangRequest r{g.instance, g.priority, {}, spread(g)};
  for (const cluster::StartTe& t : g.tes)
    r.processes.push_back({t.role, t.threads, t.memory_bytes});
  return r;
}

}  // namespace

Result<std::vector<cluster::NodeCapacity>> ClusterNodes::list(membership::Membership& session) {
  KEEL_ASSIGN_OR_RETURN(std::vector<membership::Member> members, session.list());
  std::vector<cluster::NodeCapacity> out;
  for (const membership::Member& m : members) {
    if (m.kind != membership::MemberKind::kNode) continue;
    Result<cluster::NodeCapacity> c =
        cluster::capacity_from_attributes(m.id, m.address, m.attributes);
    if (!c.ok()) {
      KEEL_LOG_WARN("cluster: node {} skipped: {}", m.id, c.status().to_string());
      continue;
    }
    out.push_back(std::move(*c));
  }
  return out;
}

Status ClusterNodes::announce(membership::Membership& session) {
  KEEL_ASSIGN_OR_RETURN(std::vector<cluster::NodeCapacity> nodes, list(session));
  const int64_t token = fence();
  // Every agent at once, each bounded by kAnnounceTimeout: a cut-off host (the old leader's,
  // typically) must not hold up the take-over; it learns the token with the next command it gets.
  std::vector<Status> told(nodes.size());
  std::vector<std::thread> callers;
  for (size_t i = 0; i < nodes.size(); ++i) {
    callers.emplace_back([&, i] {
      Result<cluster::Json> reply =
          caller_->call(nodes[i].address, cluster::encode(cluster::Fence{config_.election, token}),
                        kAnnounceTimeout);
      told[i] = reply.ok() ? cluster::decode_status_body(*reply) : reply.status();
    });
  }
  for (std::thread& t : callers) t.join();
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (told[i].code() == StatusCode::kFailedPrecondition) {
      return told[i].with_prefix("cluster: node " + nodes[i].host_id);
    }
    if (!told[i].ok()) {
      KEEL_LOG_WARN("cluster: node {} not told fencing token {}: {}", nodes[i].host_id, token,
                    told[i].to_string());
    }
  }
  KEEL_LOG_INFO("cluster: fencing token {} announced to {} node agents", token, nodes.size());
  return {};
}

ClusterNodes::ClusterNodes(ClusterNodesConfig config)
    : config_(std::move(config)),
      caller_(config_.caller ? config_.caller : std::make_shared<LinkCaller>()),
      clock_(config_.clock ? config_.clock : &steady_) {}

std::map<std::string, ClusterNodes::TeUse> ClusterNodes::te_use(membership::Membership& session) {
  std::map<std::string, TeUse> use;
  Result<std::vector<membership::Member>> members = session.list();
  if (!members.ok()) {
    KEEL_LOG_WARN("cluster: JEs not listed ({}): no TE counts as idle",
                  members.status().to_string());
    return use;
  }
  for (const membership::Member& m : *members) {
    if (m.kind != membership::MemberKind::kJobExecutor || m.address.empty()) continue;
    Result<cluster::Json> reply = caller_->call(
        m.address, net::Message{std::string(cluster::msg::kFleet), cluster::Json::object()},
        config_.call_timeout);
    Result<cluster::FleetStatus> fleet = reply.ok() ? cluster::decode_fleet_status(*reply)
                                                    : Result<cluster::FleetStatus>(reply.status());
    if (!fleet.ok()) {
      KEEL_LOG_WARN("cluster: je {} not asked for its fleet: {}", m.id, fleet.status().to_string());
      continue;
    }
    for (const cluster::TeInfo& te : fleet->fleet.tes) {
      TeUse& u = use[te.id];
      u.idle = u.idle && te.healthy && te.load.num_waiting == 0 && te.load.num_running == 0;
      u.listed.emplace_back(m.address, te.address);
    }
  }
  return use;
}

void ClusterNodes::log_event(cluster::Json event) {
  if (config_.event_log.empty()) return;
  event["unix_s"] = static_cast<double>(std::time(nullptr));
  std::ofstream out(config_.event_log, std::ios::app);
  out << event.dump() << "\n" << std::flush;
  if (!out) KEEL_LOG_WARN("cluster: cannot append to the event log {}", config_.event_log);
}

Status ClusterNodes::evict(const std::string& instance, const GangStart& for_gang,
                           std::vector<cluster::NodeCapacity>& nodes,
                           const std::map<std::string, TeUse>& use) {
  const int64_t t0 = clock_->now_ns();
  cluster::Json tes = cluster::Json::array();
  int32_t priority = 0;
  for (cluster::NodeCapacity& n : nodes) {
    for (const cluster::HostedTe& t : n.tes) {
      if (t.instance != instance) continue;
      priority = t.priority;
      const auto u = use.find(t.id);
      const std::vector<std::pair<std::string, std::string>> listed =
          u == use.end() ? std::vector<std::pair<std::string, std::string>>{} : u->second.listed;
      const auto tell_jes = [&](bool forget) {
        for (const auto& [je, te_address] : listed) {
          Result<cluster::Json> r = caller_->call(
              je, cluster::encode(cluster::RemoveTe{te_address, forget}), config_.call_timeout);
          const Status s = r.ok() ? cluster::decode_status_body(*r) : r.status();
          if (!s.ok()) KEEL_LOG_WARN("cluster: remove_te {} at je {}: {}", t.id, je, s.to_string());
        }
      };
      tell_jes(false);  // drain: no new task goes there
      const cluster::StopTe stop = stop_request(t.id, config_.drain_grace);
      KEEL_ASSIGN_OR_RETURN(cluster::Json reply,
                            caller_->call(n.address, cluster::encode(stop),
                                          config_.drain_grace + std::chrono::seconds(5)));
      const Status stopped = cluster::decode_status_body(reply);
      if (stopped.code() == StatusCode::kNotFound) {  // gone already (a stage whose peer left)
        KEEL_LOG_INFO("cluster: evict {} on {}: already gone", t.id, n.host_id);
      } else {
        KEEL_TRY(stopped.with_prefix("cluster: evict " + t.id + " on " + n.host_id));
      }
      tell_jes(true);
      tes.push_back({{"id", t.id}, {"host", n.host_id}});
    }
    const size_t before = n.tes.size();
    std::erase_if(n.tes, [&](const cluster::HostedTe& t) { return t.instance == instance; });
    n.running_tes -= static_cast<int32_t>(before - n.tes.size());
  }
  gangs_.erase(instance);  // one of this manager's own: evicted, not lost
  std::erase_if(started_, [&](const auto& s) {
    return std::any_of(tes.begin(), tes.end(),
                       [&](const cluster::Json& t) { return t["id"] == s.second.id; });
  });
  const double seconds = static_cast<double>(clock_->now_ns() - t0) * 1e-9;
  ++evicted_;
  KEEL_LOG_INFO("cluster: evicted idle instance {} (priority {}) for {} (priority {}) in {:.2f} s",
                instance, priority, for_gang.instance, for_gang.priority, seconds);
  log_event({{"event", "evict"},
             {"instance", instance},
             {"priority", priority},
             {"for", for_gang.instance},
             {"for_priority", for_gang.priority},
             {"tes", tes},
             {"seconds", seconds}});
  return {};
}

Result<RemoteTe> ClusterNodes::start_one(const cluster::NodeCapacity& node,
                                         cluster::StartTe start) {
  start.election = config_.election;
  start.fence = fence();
  KEEL_ASSIGN_OR_RETURN(cluster::Json reply,
                        caller_->call(node.address, cluster::encode(start), config_.start_timeout));
  KEEL_ASSIGN_OR_RETURN(cluster::StartTeReply r, cluster::decode_start_te_reply(reply));
  KEEL_TRY(r.status);
  RemoteTe te{r.id, node.host_id, r.address, r.pid, start.role};
  KEEL_LOG_INFO("cluster: te {} ({}) on node {} at {} (pid {}){}", te.id, start.role, te.host_id,
                te.address, te.pid, r.warm ? ", from its warm pool" : "");
  started_.emplace_back(node.address, te);
  return te;
}

Result<std::vector<RemoteTe>> ClusterNodes::start_gang(membership::Membership& session,
                                                       const GangStart& g) {
  KEEL_ASSIGN_OR_RETURN(std::vector<cluster::NodeCapacity> nodes, list(session));
  return place_and_start(g, nodes, te_use(session));
}

Result<std::vector<RemoteTe>> ClusterNodes::place_and_start(
    const GangStart& g, std::vector<cluster::NodeCapacity>& nodes,
    const std::map<std::string, TeUse>& use) {
  Result<cluster::GangPlan> plan = cluster::place_gang(gang_hosts(nodes, use), gang_request(g));
  if (!plan.ok()) {
    ++unplaceable_;
    log_event({{"event", "gang_unplaceable"},
               {"instance", g.instance},
               {"priority", g.priority},
               {"reason", plan.status().message()}});
    return plan.status();
  }
  for (const std::string& victim : plan->evict) KEEL_TRY(evict(victim, g, nodes, use));
  cluster::Json processes = cluster::Json::array();
  std::vector<RemoteTe> out;
  std::string stage1;  // the gang's stage 1, started first: its stage 0 connects to it
  std::vector<std::string> members;  // its expert members, started first: their TE connects
  for (size_t i = 0; i < g.tes.size(); ++i) {
    cluster::StartTe start = g.tes[i];
    start.instance = g.instance;
    start.priority = g.priority;
    if (!stage1.empty() && pipelined(start)) {
      start.engine.pp_stage1 = stage1;
    }
    if (!members.empty() && expert_parallel(start)) start.engine.ep_remote = members;
    const auto node = std::find_if(nodes.begin(), nodes.end(),
                                   [&](const auto& n) { return n.host_id == plan->hosts[i]; });
    Result<RemoteTe> te = start_one(*node, start);
    if (!te.ok()) {  // all or nothing: what this gang started goes again
      for (const RemoteTe& done : out) (void)stop_te(done.id, std::chrono::milliseconds(5000));
      return te.status().with_prefix("cluster: start " + start.id + " on node " + node->host_id);
    }
    node->tes.push_back(
        {te->id, g.instance, g.priority, start.threads, start.memory_bytes, start.role});
    ++node->running_tes;
    if (start.role == cluster::kPpStageRole) stage1 = te->address;
    if (start.role == cluster::kEpExpertRole) members.push_back(te->address);
    processes.push_back({{"id", te->id},
                         {"role", start.role},
                         {"host", te->host_id},
                         {"address", te->address},
                         {"pid", te->pid}});
    out.push_back(std::move(*te));
  }
  ++placed_;
  gangs_[g.instance] = PlacedGang{g, out};
  cluster::Json evicted = cluster::Json::array();
  for (const std::string& v : plan->evict) evicted.push_back(v);
  KEEL_LOG_INFO("cluster: instance {} (priority {}) placed: {} processes, {} evicted", g.instance,
                g.priority, g.tes.size(), plan->evict.size());
  log_event({{"event", "gang_placed"},
             {"instance", g.instance},
             {"priority", g.priority},
             {"processes", processes},
             {"evicted", evicted}});
  return out;
}

Result<std::vector<RemoteTe>> ClusterNodes::start_gangs(membership::Membership& session,
                                                        const std::vector<GangStart>& gangs) {
  KEEL_ASSIGN_OR_RETURN(std::vector<cluster::NodeCapacity> nodes, list(session));
  const std::map<std::string, TeUse> use = te_use(session);
  std::vector<RemoteTe> out;
  for (const GangStart& g : gangs) {
    Result<std::vector<RemoteTe>> started = place_and_start(g, nodes, use);
    if (!started.ok()) {
      stop_all(std::chrono::milliseconds(5000));
      return started.status();
    }
    out.insert(out.end(), started->begin(), started->end());
  }
  return out;
}

Status ClusterNodes::stop_te(const std::string& id, std::chrono::milliseconds grace) {
  for (auto g = gangs_.begin(); g != gangs_.end(); ++g) {
    std::vector<RemoteTe>& ps = g->second.processes;
    const auto p =
        std::find_if(ps.begin(), ps.end(), [&](const RemoteTe& x) { return x.id == id; });
    if (p == ps.end()) continue;
    if (serves_together(g->second.start)) return stop_gang(std::string(g->first), grace);
    ps.erase(p);  // a pair's TE alone: its peer serves on
    if (ps.empty()) gangs_.erase(g);
    break;
  }
  const auto it = std::find_if(started_.begin(), started_.end(),
                               [&](const auto& s) { return s.second.id == id; });
  if (it == started_.end()) return Status::not_found("cluster: te " + id + " is not managed here");
  const std::string agent = it->first;
  const RemoteTe te = it->second;
  started_.erase(it);
  KEEL_ASSIGN_OR_RETURN(cluster::Json reply,
                        caller_->call(agent, cluster::encode(stop_request(id, grace)),
                                      grace + std::chrono::seconds(2)));
  return cluster::decode_status_body(reply).with_prefix("cluster: stop " + id + " on node " +
                                                        te.host_id);
}

Status ClusterNodes::stop_gang(const std::string& instance, std::chrono::milliseconds grace,
                               membership::Membership* session) {
  const auto g = gangs_.find(instance);
  if (g == gangs_.end()) return Status::not_found("cluster: no gang " + instance + " placed here");
  const PlacedGang gang = g->second;
  gangs_.erase(g);
  const std::map<std::string, TeUse> use =
      session != nullptr ? te_use(*session) : std::map<std::string, TeUse>{};
  std::vector<RemoteTe> order = gang.processes;  // its TEs first: a stage or member exits with them
  std::stable_partition(order.begin(), order.end(),
                        [](const RemoteTe& p) { return is_te_role(p.role); });
  Status first;
  for (const RemoteTe& p : order) {
    const auto it = std::find_if(started_.begin(), started_.end(),
                                 [&](const auto& s) { return s.second.id == p.id; });
    if (it == started_.end()) continue;
    const std::string agent = it->first;
    started_.erase(it);
    Result<cluster::Json> reply = caller_->call(agent, cluster::encode(stop_request(p.id, grace)),
                                                grace + std::chrono::seconds(2));
    Status s = reply.ok() ? cluster::decode_status_body(*reply) : reply.status();
    if (s.code() == StatusCode::kNotFound) s = {};  // gone already (exited with its gang)
    if (!s.ok()) {
      KEEL_LOG_WARN("cluster: {} of gang {} on node {} not stopped: {}", p.id, instance, p.host_id,
                    s.to_string());
      if (first.ok()) first = s.with_prefix("cluster: stop " + p.id + " on node " + p.host_id);
    }
    const auto u = use.find(p.id);
    if (u == use.end()) continue;
    for (const auto& [je, te_address] : u->second.listed) {  // its jobs were re-driven already
      Result<cluster::Json> r = caller_->call(
          je, cluster::encode(cluster::RemoveTe{te_address, true}), config_.call_timeout);
      const Status removed = r.ok() ? cluster::decode_status_body(*r) : r.status();
      if (!removed.ok()) {
        KEEL_LOG_WARN("cluster: remove_te {} at je {}: {}", p.id, je, removed.to_string());
      }
    }
  }
  return first;
}

Result<std::vector<RemoteTe>> ClusterNodes::take_over(membership::Membership& session,
                                                      const std::string& model,
                                                      std::vector<cluster::StartTe> wanted,
                                                      int32_t priority, size_t* adopted) {
  KEEL_ASSIGN_OR_RETURN(std::vector<membership::Member> members, session.list());
  KEEL_ASSIGN_OR_RETURN(std::vector<cluster::NodeCapacity> nodes, list(session));
  std::vector<cluster::LiveTe> live;
  std::map<std::string, std::string> te_address;
  for (const membership::Member& m : members) {
    const auto model_it = m.attributes.find("model");
    if (m.kind != membership::MemberKind::kTaskExecutor || model_it == m.attributes.end() ||
        model_it->second != model) {
      continue;
    }
    const auto role = m.attributes.find("role");
    live.push_back({m.id, role == m.attributes.end() ? "colocated" : role->second});
    te_address[m.id] = m.address;
  }
  std::vector<std::string> roles;
  for (const cluster::StartTe& s : wanted) roles.push_back(s.role);
  const cluster::TakeoverPlan plan = cluster::plan_takeover(roles, live, model + "-te-");
  std::vector<RemoteTe> out;
  std::vector<std::pair<std::string, RemoteTe>> adopted_tes;  // kept once the starts succeed
  for (const std::string& id : plan.adopted) {  // stopped later through the agent on its host
    Result<net::HostPort> te = net::parse_host_port(te_address[id]);
    RemoteTe r{id, "", te_address[id], 0};
    std::string agent;
    for (const cluster::NodeCapacity& n : nodes) {
      Result<net::HostPort> a = net::parse_host_port(n.address);
      if (te.ok() && a.ok() && a->host == te->host) {
        r.host_id = n.host_id;
        agent = n.address;
      }
    }
    KEEL_LOG_INFO("cluster: te {} at {} adopted (node {})", id, r.address,
                  r.host_id.empty() ? "unknown" : r.host_id);
    if (!agent.empty()) adopted_tes.emplace_back(agent, r);
    out.push_back(std::move(r));
  }
  if (adopted != nullptr) *adopted = plan.adopted.size();
  std::vector<cluster::StartTe> starts;
  for (const cluster::TeToStart& t : plan.start) {
    starts.push_back(std::move(wanted[t.wanted_idx]));
    starts.back().id = t.id;
  }
  std::vector<GangStart> gangs;  // each missing TE alone: its peers may be the adopted ones
  for (cluster::StartTe& s : starts) {
    const std::string id = s.id;
    gangs.push_back(gang_of(id, priority, std::move(s)));  // with its own stage 1 or members
  }
  KEEL_ASSIGN_OR_RETURN(std::vector<RemoteTe> started, start_gangs(session, gangs));
  out.insert(out.end(), started.begin(), started.end());
  started_.insert(started_.end(), adopted_tes.begin(), adopted_tes.end());
  return out;
}

void ClusterNodes::forget() {
  started_.clear();
  gangs_.clear();
  caller_->close();
}

void ClusterNodes::stop_all(std::chrono::milliseconds grace) {
  for (const auto& [agent, te] : started_) {
    Result<cluster::Json> reply = caller_->call(agent, cluster::encode(stop_request(te.id, grace)),
                                                grace + std::chrono::seconds(2));
    const Status s = reply.ok() ? cluster::decode_status_body(*reply) : reply.status();
    if (!s.ok())
      KEEL_LOG_WARN("cluster: te {} on node {} not stopped: {}", te.id, te.host_id, s.to_string());
  }
  started_.clear();
  gangs_.clear();
  caller_->close();
}

std::string ClusterNodes::metrics_text() const {
  const std::string labels = "model_name=\"" + config_.model + "\"";
  std::string out;
  out += "# TYPE keel:gang_placements_total counter\n";
  out += "keel:gang_placements_total{" + labels + "} " + std::to_string(placed_.load()) + "\n";
  out += "# TYPE keel:gang_evictions_total counter\n";
  out += "keel:gang_evictions_total{" + labels + "} " + std::to_string(evicted_.load()) + "\n";
  out += "# TYPE keel:gang_unplaceable_total counter\n";
  out +=
      "keel:gang_unplaceable_total{" + labels + "} " + std::to_string(unplaceable_.load()) + "\n";
  return out;
}

}  // namespace keel::control
