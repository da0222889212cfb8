// The node agent's requests, capacity and children (see node_agent.h).
#include "control/placement/node_agent.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cluster/protocol/executor_launch.h"
#include "core/file_system.h"
#include "core/log.h"
#include "proc/ready_line.h"
#include "store/model_store.h"

namespace keel::control {

cluster::MembershipSpec NodeAgent::te_membership() const {
  cluster::MembershipSpec m = o_.membership.spec();
  m.mode = "etcd";
  return m;
}

cluster::NodeCapacity NodeAgent::capacity() const {
  cluster::NodeCapacity c;
  c.host_id = o_.host_id;
  c.address = listen_.host + ":" + std::to_string(server_->port());
  c.cores = o_.cores > 0 ? o_.cores
                         : static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  std::ifstream in("/proc/meminfo");
  std::stringstream text;
  text << in.rdbuf();
  const Result<int64_t> total = cluster::parse_meminfo_field(text.str(), "MemTotal");
  const Result<int64_t> available = cluster::parse_meminfo_field(text.str(), "MemAvailable");
  c.memory_total_bytes = total.ok() ? *total : 0;
  if (o_.memory_bytes > 0) {  // a declared cap (tests; a share of a bigger host)
    c.memory_total_bytes = c.memory_total_bytes > 0
                               ? std::min(c.memory_total_bytes, o_.memory_bytes)
                               : o_.memory_bytes;
  }
  c.memory_available_bytes = std::min(c.memory_total_bytes, available.ok() ? *available : 0);
  if (!o_.store_dir.empty()) {
    PosixFileSystem fs;
    store::ModelStore st({.dir = o_.store_dir}, &fs);
    if (Result<std::vector<store::EntryInfo>> e = st.entries(); e.ok()) {
      for (const store::EntryInfo& x : *e) {
        c.models.push_back(std::filesystem::path(x.path).filename().string());
      }
    }
  }
  c.max_tes = o_.max_tes > 0 ? o_.max_tes : c.cores;
  c.running_tes = static_cast<int32_t>(tes_.size());
  for (const auto& [id, t] : tes_) {
    c.tes.push_back(
        {id, t.instance.empty() ? id : t.instance, t.priority, t.threads, t.memory_bytes, t.role});
  }
  c.warm_tes = pool_ ? static_cast<int32_t>(pool_->idle()) : 0;
  c.stopped.assign(stopped_.begin(), stopped_.end());
  return c;
}

void NodeAgent::publish() {
  const cluster::NodeCapacity c = capacity();
  std::map<std::string, std::string> attrs = cluster::capacity_attributes(c);
  attrs["pid"] = std::to_string(getpid());
  if (attrs == published_) return;
  const Status s = member_->add(membership::MemberKind::kNode, o_.host_id, c.address, attrs);
  if (!s.ok()) {
    KEEL_LOG_WARN("node-agent {}: capacity not published: {}", o_.host_id, s.to_string());
    return;
  }
  published_ = std::move(attrs);
}

Status NodeAgent::start() {
  if (o_.membership.mode != "etcd") {
    return Status::invalid_argument("node-agent: needs --membership etcd --etcd-endpoints URLS");
  }
  KEEL_TRY(membership::validate_name("--host-id", o_.host_id));
  if (o_.listen.size() > 2 && o_.listen.ends_with(":0")) {  // a free port
    listen_.host = o_.listen.substr(0, o_.listen.size() - 2);
  } else {
    KEEL_ASSIGN_OR_RETURN(listen_, net::parse_host_port(o_.listen));
  }
  if (listen_.host == "0.0.0.0") {
    return Status::invalid_argument("node-agent: --listen needs the host's address, not 0.0.0.0");
  }
  KEEL_ASSIGN_OR_RETURN(server_, net::LinkServer::start(listen_.host, listen_.port,
                                                        [this](net::Link& link, net::Message m) {
                                                          on_message(link, std::move(m));
                                                        }));
  if (o_.warm > 0) {
    control::WarmPoolConfig wc;
    // Warm TEs bind to a model later; their bind port is reached on loopback, their control port
    // from other hosts (registered at --advertise-host).
    wc.keel_command = o_.keel_command;
    wc.spec.warm = true;
    wc.spec.host = "0.0.0.0";
    wc.spec.advertise_host = listen_.host;
    wc.spec.threads = o_.threads_per_te;
    wc.spec.store_dir = o_.store_dir;
    wc.spec.membership = te_membership();
    wc.name_prefix = o_.host_id + "-warm-te";
    wc.start_timeout = std::chrono::milliseconds(static_cast<int64_t>(o_.start_timeout_s * 1000));
    pool_ = std::make_unique<control::WarmPool>(&sup_, std::move(wc));
    KEEL_TRY(pool_->refill(o_.warm));
  }
  KEEL_ASSIGN_OR_RETURN(member_, ClusterMembership::open(o_.membership));
  publish();
  if (published_.empty()) return Status::unavailable("node-agent: could not register the host");
  const cluster::NodeCapacity c = capacity();
  KEEL_LOG_INFO("node-agent {}: {} cores, {} MiB, {} store entries, {} warm TEs; control at {}",
                o_.host_id, c.cores, c.memory_total_bytes >> 20, c.models.size(), c.warm_tes,
                c.address);
  return proc::print_ready_line(
      {{"role", "node-agent"}, {"id", o_.host_id}, {"port", server_->port()}, {"pid", getpid()}});
}

void NodeAgent::on_message(net::Link& link, net::Message m) {
  MutexLock lock(queue_mu_);
  queue_.push_back({link.shared_from_this(), std::move(m)});
}

cluster::StartTeReply NodeAgent::start_te(const cluster::StartTe& req) {
  cluster::StartTeReply reply;
  if (tes_.count(req.id) > 0 || sup_.find(req.id)) {
    reply.status = Status::invalid_argument("te " + req.id + " already runs on " + o_.host_id);
    return reply;
  }
  const cluster::NodeCapacity c = capacity();
  if (c.running_tes >= c.max_tes) {
    reply.status = Status::resource_exhausted("node " + o_.host_id + " runs " +
                                              std::to_string(c.running_tes) + " TEs (its max)");
    return reply;
  }
  const bool name_fits =
      req.served_model_name.empty() ||
      req.served_model_name == (o_.model_name
                                    ? o_.model_name(req.model_path)
                                    : std::filesystem::path(req.model_path).stem().string());
  const bool not_a_te = req.role == cluster::kPpStageRole || req.role == cluster::kEpExpertRole;
  if (pool_ && pool_->idle() > 0 && name_fits && !not_a_te) {
    cluster::BindModel bind;
    bind.model_path = req.model_path;
    bind.role = req.role;
    bind.engine = req.engine;  // replaces the warm TE's own
    bind.isa = req.isa;
    std::vector<Result<control::BoundTe>> bound = pool_->bind(1, bind);
    if (bound.size() == 1 && bound[0].ok()) {
      const std::string port = bound[0]->address.substr(bound[0]->address.rfind(':') + 1);
      reply.id = bound[0]->name;
      reply.address = listen_.host + ":" + port;
      reply.pid = bound[0]->pid;
      reply.warm = true;
      tes_[reply.id] = {bound[0]->pid, reply.address,    req.instance, req.priority,
                        req.threads,   req.memory_bytes, req.role};
      return reply;
    }
    KEEL_LOG_WARN("node-agent {}: warm bind failed ({}); cold start", o_.host_id,
                  bound.empty() ? "no TE" : bound[0].status().to_string());
  }
  Result<proc::Child> child = sup_.spawn(start_child(req));
  if (!child.ok()) {
    reply.status = child.status();
    return reply;
  }
  Result<int> port = proc::ready_port(child->ready);
  if (!port.ok()) {
    reply.status = port.status();
    (void)sup_.stop(child->pid, std::chrono::milliseconds(2000));
    return reply;
  }
  reply.id = req.id;
  reply.address = listen_.host + ":" + std::to_string(*port);
  reply.pid = child->pid;
  tes_[req.id] = {child->pid,  reply.address,    req.instance, req.priority,
                  req.threads, req.memory_bytes, req.role};
  return reply;
}

proc::ChildSpec NodeAgent::start_child(const cluster::StartTe& req) const {
  cluster::TeSpec spec;
  spec.id = req.id;
  spec.model_path = req.model_path;
  spec.served_model_name = req.served_model_name;
  spec.host = listen_.host;
  spec.threads = req.threads;
  spec.isa = req.isa;
  spec.engine = req.engine;
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o_.start_timeout_s * 1000));
  if (req.role == cluster::kPpStageRole) {  // no membership, no queue: it serves its stage 0
    proc::ChildSpec child = cluster::te_child(o_.keel_command, spec, timeout);
    child.argv = {o_.keel_command.at(0), "pp-stage", "--spec", "-", "--exit-with-peer"};
    return child;
  }
  if (req.role == cluster::kEpExpertRole) {  // no membership, no queue: it serves its leader
    proc::ChildSpec child = cluster::te_child(o_.keel_command, spec, timeout);
    child.argv = o_.keel_command;
    child.argv.insert(child.argv.end(), {"ep-expert", "--spec", "-", "--exit-with-leader"});
    return child;
  }
  spec.role = req.role;
  spec.store_dir = o_.store_dir;
  spec.membership = te_membership();
  return cluster::te_child(o_.keel_command, spec, timeout);
}

Status NodeAgent::stop_te(const cluster::StopTe& req) {
  const auto it = tes_.find(req.id);
  if (it == tes_.end()) return Status::not_found("te " + req.id + " does not run on " + o_.host_id);
  const pid_t pid = it->second.pid;
  tes_.erase(it);
  stopped_.push_back(req.id);  // gone on purpose: a manager watching its gang is told so
  if (stopped_.size() > cluster::kMaxStoppedIds) stopped_.pop_front();
  KEEL_ASSIGN_OR_RETURN(proc::ChildExit e, sup_.stop(pid, std::chrono::milliseconds(req.grace_ms)));
  KEEL_LOG_INFO("node-agent {}: te {} stopped: {}", o_.host_id, req.id, e.describe());
  return {};
}

Status NodeAgent::admit(const char* call, const std::string& election, int64_t token) {
  const int64_t before = fence_.highest(election);
  Status s = fence_.admit(election, token);
  if (!s.ok()) {
    KEEL_LOG_WARN("node-agent {}: {} refused: {}", o_.host_id, call, s.to_string());
  } else if (token > before) {
    KEEL_LOG_INFO("node-agent {}: fencing token of '{}' now {}", o_.host_id, election, token);
  }
  return s;
}

void NodeAgent::handle(const Pending& p) {
  const auto id = p.message.body.find("call_id");
  if (id == p.message.body.end() || !id->is_number_integer()) return;  // not a call
  const int64_t call_id = id->get<int64_t>();
  if (p.message.type == cluster::msg::kStartTe) {
    Result<cluster::StartTe> req = cluster::decode_start_te(p.message.body);
    cluster::StartTeReply reply;
    reply.status = req.ok() ? admit("start_te", req->election, req->fence) : req.status();
    if (reply.status.ok()) {
      reply = start_te(*req);
      KEEL_LOG_INFO("node-agent {}: start_te {}: {}{}", o_.host_id, req->id,
                    reply.status.ok() ? reply.address : reply.status.to_string(),
                    reply.warm ? " (warm pool)" : "");
    }
    p.link->reply(call_id, cluster::encode_body(reply));
  } else if (p.message.type == cluster::msg::kStopTe) {
    Result<cluster::StopTe> req = cluster::decode_stop_te(p.message.body);
    Status s = req.ok() ? admit("stop_te", req->election, req->fence) : req.status();
    if (s.ok()) s = stop_te(*req);
    p.link->reply(call_id, cluster::status_body(s));
  } else if (p.message.type == cluster::msg::kFence) {
    Result<cluster::Fence> req = cluster::decode_fence(p.message.body);
    const Status s = req.ok() ? admit("fence", req->election, req->fence) : req.status();
    p.link->reply(call_id, cluster::status_body(s));
  } else {
    p.link->reply(call_id, cluster::status_body(Status::invalid_argument(
                               "node-agent: unknown message '" + p.message.type + "'")));
  }
}

int NodeAgent::run(const sigset_t& stop_signals) {
  while (true) {
    timespec tick{0, 50 * 1000 * 1000};
    const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
    if (sig > 0) return sig;
    std::deque<Pending> batch;
    {
      MutexLock lock(queue_mu_);
      batch.swap(queue_);
    }
    for (const Pending& p : batch) handle(p);
    for (const proc::ChildExit& e : sup_.poll_exits()) {
      KEEL_LOG_WARN("node-agent {}: {} exited: {}", o_.host_id, e.name, e.describe());
      std::erase_if(tes_, [&](const auto& t) { return t.second.pid == e.pid; });
    }
    if (pool_ && static_cast<int>(pool_->idle()) < o_.warm) {
      if (Status s = pool_->refill(o_.warm); !s.ok()) {
        KEEL_LOG_WARN("node-agent {}: warm pool: {}", o_.host_id, s.to_string());
      }
    }
    if (!member_->alive()) {
      KEEL_LOG_ERROR("node-agent {}: lease lost; registering again", o_.host_id);
      (void)member_->close();
      Result<std::unique_ptr<ClusterMembership>> m = ClusterMembership::open(o_.membership);
      if (m.ok()) {
        member_ = std::move(*m);
        published_.clear();
      }
    }
    publish();
  }
}

void NodeAgent::shutdown() {
  if (server_) server_->stop();
  (void)sup_.stop_all(std::chrono::milliseconds(10000));
  if (member_) (void)member_->close();
}

}  // namespace keel::control
