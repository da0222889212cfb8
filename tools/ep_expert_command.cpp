// `keel ep-expert`: one expert member of an expert-parallel MoE instance (ep/expert_member.h).
// Loads only its shard's experts, then either
//   --channel NAME: started by its leader (`keel serve --ep N`), attaches the leader's
//     shared-memory channel and answers its frames until the leader says goodbye or is gone (its
//     parent process changed); or
//   --listen HOST:PORT: started on another host (by hand, or a deployment's supervisor), listens
//     over UCX, prints its ready line ({"role":"ep-expert","port":P,"pid":N}) and serves the
//     leaders that name it in --ep-remote, one after another, until stopped — or, with
//     --exit-with-leader, until its first leader says goodbye or its connection fails; or
//   --spec -: as a node agent starts a gang's member (cluster/protocol/node_messages.h, role
//     ep-expert): --listen HOST:0 with the model, shard and compute of the TeSpec on stdin.
// A leader's hello that names replicated experts (`--ep-replicas`) has it load its range again
// with those copies.
#include <unistd.h>

#include "cluster/protocol/spec_source.h"
#include "commands.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "ep/expert_member.h"
#include "ep/shm_channel.h"
#include "ep/ucx_channel.h"
#include "host/compute.h"
#include "host/model_loading.h"
#include "net/host_port.h"
#include "proc/ready_line.h"

namespace keel::cli {
namespace {

// "I/N" with 1 ≤ I < N ≤ 8.
Result<model::ExpertShard> parse_shard(const std::string& s) {
  const size_t slash = s.find('/');
  int index = -1, count = -1;
  if (slash != std::string::npos) {
    try {
      index = std::stoi(s.substr(0, slash));
      count = std::stoi(s.substr(slash + 1));
    } catch (const std::exception&) {
      index = -1;
    }
  }
  const model::ExpertShard shard{index, count, true};
  if (index < 1 || count > 8 || !shard.validate().ok()) {
    return Status::invalid_argument("--shard expects I/N with 1 <= I < N <= 8, got '" + s + "'");
  }
  return shard;
}

// The --listen address: HOST:PORT, port 0 allowed.
Result<net::HostPort> parse_listen(const std::string& s) {
  const size_t colon = s.rfind(':');
  if (colon != std::string::npos && colon > 0 && s.substr(colon + 1) == "0") {
    return net::HostPort{s.substr(0, colon), 0};
  }
  return net::parse_host_port(s);  // its error names the address
}

// The options a node agent's TeSpec gives (model, host, shard ep_member/ep, compute).
Result<EpExpertOptions> from_spec(const EpExpertOptions& given) {
  KEEL_ASSIGN_OR_RETURN(const cluster::TeSpec spec, cluster::read_te_spec(given.spec_source));
  if (spec.engine.ep_member < 1) {
    return Status::invalid_argument(
        "ep-expert --spec: the spec names no member (engine.ep_member)");
  }
  EpExpertOptions o = given;
  o.model_path = spec.model_path;
  o.listen = spec.host + ":" + std::to_string(spec.port);
  o.shard = std::to_string(spec.engine.ep_member) + "/" + std::to_string(spec.engine.ep);
  o.compute.threads = spec.threads;
  o.compute.isa = spec.isa;
  o.compute.weight_layout = spec.engine.weight_layout;
  o.compute.use_mmap = spec.engine.use_mmap;
  return o;
}

Status ep_expert(const EpExpertOptions& opts) {
  const pid_t leader = ::getppid();
  if (opts.model_path.empty() || opts.shard.empty()) {
    return Status::invalid_argument("ep-expert needs -m and --shard, or --spec");
  }
  if (opts.exit_with_leader && opts.listen.empty()) {
    return Status::invalid_argument("--exit-with-leader goes with --listen (or --spec)");
  }
  if (opts.channel.empty() == opts.listen.empty()) {
    return Status::invalid_argument("ep-expert needs one of --channel or --listen");
  }
  KEEL_ASSIGN_OR_RETURN(const model::ExpertShard shard, parse_shard(opts.shard));
  net::HostPort listen;
  if (!opts.listen.empty()) {
    KEEL_ASSIGN_OR_RETURN(listen, parse_listen(opts.listen));
  }
  KEEL_ASSIGN_OR_RETURN(host::ComputeSetup compute, host::setup_compute(opts.compute));
  model::ModelOptions mopts;
  mopts.expert_shard = shard;
  KEEL_ASSIGN_OR_RETURN(host::LoadedModel loaded,
                        host::load_model(opts.model_path, opts.compute, mopts));
  std::unique_ptr<ep::ExpertChannel> channel;
  const ep::UcxChannel* ucx_channel = nullptr;
  uint16_t port = 0;
  if (opts.listen.empty()) {
    KEEL_ASSIGN_OR_RETURN(channel, ep::ShmChannel::attach(opts.channel));
  } else {
    KEEL_ASSIGN_OR_RETURN(std::unique_ptr<ep::UcxChannel> ucx,
                          ep::UcxChannel::listen(listen.host, listen.port));
    port = ucx->port();
    ucx_channel = ucx.get();
    channel = std::move(ucx);
  }
  KEEL_LOG_INFO(
      "ep-expert: {} shard {}/{} ({} of {} experts), {} threads", loaded.path, shard.index,
      shard.count,
      (loaded.model->hparams().moe.n_expert - shard.index + shard.count - 1) / shard.count,
      loaded.model->hparams().moe.n_expert, compute.threads);
  ThreadPool pool(compute.threads);
  kernels::Ops ops(compute.isa, &pool);
  ep::ExpertMemberOptions member;
  // A leader with replicated hot experts names the ones this member holds: its range is loaded
  // again with them (the old model freed first, so the member never holds both).
  member.reload = [&](const model::ExpertShard& next) -> Result<const model::Model*> {
    loaded.model.reset();
    model::ModelOptions with = mopts;
    with.expert_shard = next;
    KEEL_ASSIGN_OR_RETURN(host::LoadedModel again,
                          host::load_model(opts.model_path, opts.compute, with));
    loaded = std::move(again);
    return loaded.model.get();
  };
  if (opts.listen.empty()) {
    member.leader_alive = [leader] { return ::getppid() == leader; };
  } else if (opts.exit_with_leader) {  // one leader: its goodbye or its lost connection ends us
    member.leader_alive = [ucx_channel] { return !ucx_channel->leaders_gone(); };
    KEEL_LOG_INFO("ep-expert: listening on {}:{} for one leader", listen.host, port);
  } else {
    member.keep_serving = true;
    KEEL_LOG_INFO("ep-expert: listening on {}:{}", listen.host, port);
  }
  if (!opts.listen.empty()) {
    KEEL_TRY(proc::print_ready_line(
        {{"role", "ep-expert"}, {"port", port}, {"pid", static_cast<int>(::getpid())}}));
  }
  const Status served = ep::serve_expert_member(*loaded.model, *channel, ops, member);
  if (opts.exit_with_leader && served.code() == StatusCode::kUnavailable) {
    KEEL_LOG_INFO("ep-expert: {}: exiting with it", served.message());
    return Status();
  }
  KEEL_TRY(served);
  KEEL_LOG_INFO("ep-expert: the leader said goodbye");
  return Status();
}

}  // namespace

int run_ep_expert(const EpExpertOptions& given) {
  spdlog::set_level(spdlog::level::info);
  Result<EpExpertOptions> opts = given;
  if (!given.spec_source.empty()) opts = from_spec(given);
  const Status s = opts.ok() ? ep_expert(*opts) : opts.status();
  if (!s.ok()) return report_error(s);
  return 0;
}

}  // namespace keel::cli
