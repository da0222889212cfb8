// `keel ep-expert`: one expert member of an expert-parallel MoE instance (ep/expert_member.h),
// started by its leader (`keel serve --ep N`). Loads only its shard's experts, attaches the
// leader's shared-memory channel and answers its frames until the leader says goodbye or is gone
// (its parent process changed).
#include <unistd.h>

#include "commands.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "ep/expert_member.h"
#include "ep/shm_channel.h"
#include "host/compute.h"
#include "host/model_loading.h"

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

Status ep_expert(const EpExpertOptions& opts) {
  const pid_t leader = ::getppid();
  KEEL_ASSIGN_OR_RETURN(const model::ExpertShard shard, parse_shard(opts.shard));
  KEEL_ASSIGN_OR_RETURN(host::ComputeSetup compute, host::setup_compute(opts.compute));
  model::ModelOptions mopts;
  mopts.expert_shard = shard;
  KEEL_ASSIGN_OR_RETURN(host::LoadedModel loaded,
                        host::load_model(opts.model_path, opts.compute, mopts));
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<ep::ShmChannel> channel,
                        ep::ShmChannel::attach(opts.channel));
  KEEL_LOG_INFO(
      "ep-expert: {} shard {}/{} ({} of {} experts), {} threads", loaded.path, shard.index,
      shard.count,
      (loaded.model->hparams().moe.n_expert - shard.index + shard.count - 1) / shard.count,
      loaded.model->hparams().moe.n_expert, compute.threads);
  ThreadPool pool(compute.threads);
  kernels::Ops ops(compute.isa, &pool);
  ep::ExpertMemberOptions member;
  member.leader_alive = [leader] { return ::getppid() == leader; };
  KEEL_TRY(ep::serve_expert_member(*loaded.model, *channel, ops, member));
  KEEL_LOG_INFO("ep-expert: the leader said goodbye");
  return Status();
}

}  // namespace

int run_ep_expert(const EpExpertOptions& opts) {
  spdlog::set_level(spdlog::level::info);
  const Status s = ep_expert(opts);
  if (!s.ok()) return report_error(s);
  return 0;
}

}  // namespace keel::cli
