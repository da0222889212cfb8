// ClusterNodes; see cluster_nodes.h.
#include "cluster_nodes.h"

#include <map>

#include "cluster/host_port.h"
#include "cluster/messages.h"
#include "cluster/placement.h"
#include "cluster/takeover_plan.h"
#include "core/log.h"

namespace keel::cli {

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

Result<std::shared_ptr<cluster::Link>> ClusterNodes::link_to(const std::string& address) {
  auto it = links_.find(address);
  if (it != links_.end() && !it->second->closed()) return it->second;
  KEEL_ASSIGN_OR_RETURN(std::shared_ptr<cluster::Link> link,
                        cluster::Link::connect(
                            address, std::chrono::milliseconds(5000),
                            [](cluster::Link&, cluster::Message) {}, nullptr));
  links_[address] = link;
  return link;
}

Result<std::vector<RemoteTe>> ClusterNodes::start(const std::vector<cluster::NodeCapacity>& nodes,
                                                  const std::vector<cluster::StartTe>& starts,
                                                  std::chrono::milliseconds timeout) {
  if (starts.empty()) return std::vector<RemoteTe>{};
  cluster::PlacementRequest req;
  req.tes = static_cast<int32_t>(starts.size());
  req.threads_per_te = starts[0].threads;
  KEEL_ASSIGN_OR_RETURN(std::vector<std::string> hosts, cluster::place_tes(nodes, req));
  std::map<std::string, std::string> address_of;
  for (const cluster::NodeCapacity& n : nodes) address_of[n.host_id] = n.address;
  std::vector<RemoteTe> out;
  for (size_t i = 0; i < starts.size(); ++i) {
    const std::string& agent = address_of[hosts[i]];
    Status failed;
    Result<std::shared_ptr<cluster::Link>> link = link_to(agent);
    if (link.ok()) {
      Result<cluster::Json> reply = (*link)->call(cluster::encode(starts[i]), timeout);
      Result<cluster::StartTeReply> r = reply.ok() ? cluster::decode_start_te_reply(*reply)
                                                   : Result<cluster::StartTeReply>(reply.status());
      if (r.ok() && r->status.ok()) {
        RemoteTe te{r->id, hosts[i], r->address, r->pid};
        KEEL_LOG_INFO("cluster: te {} on node {} at {} (pid {}){}", te.id, te.host_id, te.address,
                      te.pid, r->warm ? ", from its warm pool" : "");
        started_.emplace_back(agent, te);
        out.push_back(std::move(te));
        continue;
      }
      failed = r.ok() ? r->status : r.status();
    } else {
      failed = link.status();
    }
    stop_all(std::chrono::milliseconds(5000));
    return failed.with_prefix("cluster: start " + starts[i].id + " on node " + hosts[i]);
  }
  return out;
}

Result<std::vector<RemoteTe>> ClusterNodes::take_over(membership::Membership& session,
                                                      const std::string& model,
                                                      std::vector<cluster::StartTe> wanted,
                                                      std::chrono::milliseconds timeout,
                                                      size_t* adopted) {
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
  const cluster::TakeoverPlan plan = cluster::plan_takeover(roles, live);
  std::vector<RemoteTe> out;
  std::vector<std::pair<std::string, RemoteTe>> adopted_tes;  // kept once the starts succeed
  for (const std::string& id : plan.adopted) {  // stopped later through the agent on its host
    Result<cluster::HostPort> te = cluster::parse_host_port(te_address[id]);
    RemoteTe r{id, "", te_address[id], 0};
    std::string agent;
    for (const cluster::NodeCapacity& n : nodes) {
      Result<cluster::HostPort> a = cluster::parse_host_port(n.address);
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
  KEEL_ASSIGN_OR_RETURN(std::vector<RemoteTe> started, start(nodes, starts, timeout));
  out.insert(out.end(), started.begin(), started.end());
  started_.insert(started_.end(), adopted_tes.begin(), adopted_tes.end());
  return out;
}

void ClusterNodes::forget() {
  started_.clear();
  for (auto& [address, link] : links_) link->close();
  links_.clear();
}

void ClusterNodes::stop_all(std::chrono::milliseconds grace) {
  for (const auto& [agent, te] : started_) {
    Result<std::shared_ptr<cluster::Link>> link = link_to(agent);
    Status s = link.status();
    if (link.ok()) {
      cluster::StopTe stop{te.id, static_cast<int32_t>(grace.count())};
      Result<cluster::Json> reply =
          (*link)->call(cluster::encode(stop), grace + std::chrono::seconds(2));
      s = reply.ok() ? cluster::decode_status_body(*reply) : reply.status();
    }
    if (!s.ok())
      KEEL_LOG_WARN("cluster: te {} on node {} not stopped: {}", te.id, te.host_id, s.to_string());
  }
  started_.clear();
  for (auto& [address, link] : links_) link->close();
  links_.clear();
}

}  // namespace keel::cli
