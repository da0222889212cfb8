// cluster up's children; see up_children.h.
#include "control/up/up_children.h"

#include <algorithm>

#include "cluster/protocol/executor_launch.h"
#include "control/up/up_plan.h"
#include "core/log.h"
#include "proc/ready_line.h"

namespace keel::control {
namespace {

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

// Whether a TE of `model` is registered in the membership now (a previous leader's).
Result<bool> model_has_tes(membership::Membership& session, const std::string& model) {
  KEEL_ASSIGN_OR_RETURN(std::vector<membership::Member> members, session.list());
  return std::any_of(members.begin(), members.end(), [&](const membership::Member& m) {
    const auto it = m.attributes.find("model");
    return m.kind == membership::MemberKind::kTaskExecutor && it != m.attributes.end() &&
           it->second == model;
  });
}

}  // namespace

// --nodes auto: the TEs through the node agents in the membership, not forked here. With none of
// the model registered, each instance is placed as a gang (cluster_nodes.h, model_gangs); those
// still registered (a previous leader's) are adopted and only the missing ones started (one by
// one, cluster/policy/placement.h). TE and instance ids carry the model's name, so several models'
// managers share the agents.
Status start_remote_tes(ClusterNodes& nodes, membership::Membership& session,
                        const ClusterUpOptions& o, const std::string& path, const std::string& name,
                        const std::vector<std::string>& kinds, int threads, UpTree* t) {
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
  std::erase_if(tes, [](const RemoteTe& te) { return !is_te_role(te.role); });
  for (const RemoteTe& te : tes) t->te_addresses.push_back(te.address);
  KEEL_LOG_INFO("cluster: managing {} TEs through the node agents ({} adopted, {} started)",
                tes.size(), adopted, tes.size() - adopted);
  return {};
}

// `leading` false: a --nodes auto standby — its JEs only (they follow the TEs in the membership).
Result<UpTree> start_children(proc::ProcessSupervisor& sup, const ClusterUpOptions& o,
                              const std::vector<std::string>& keel, const std::string& path,
                              const std::string& name, ClusterNodes& nodes,
                              ClusterMembership& members, bool leading) {
  UpTree t;
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
    KEEL_ASSIGN_OR_RETURN(std::string address,
                          spawn(sup, cluster::te_child(keel, spec, start_timeout(o)), &child));
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
    KEEL_ASSIGN_OR_RETURN(std::string address,
                          spawn(sup, cluster::je_child(keel, spec, start_timeout(o)), &child));
    t.je_addresses.push_back(address);
    t.jes.push_back({t.je_names.back(), address, child.pid, keel, std::move(spec)});
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

// Registers the started JEs and TEs in the membership, on their behalf (embedded mode: with etcd
// they register themselves).
Status register_tree(ClusterMembership& members, const UpTree& tree, const std::string& name,
                     const MembershipConfig& o) {
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

}  // namespace keel::control
