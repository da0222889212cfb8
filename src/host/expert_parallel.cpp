// ExpertMembers: the member children of an expert-parallel leader (see expert_parallel.h).
#include "host/expert_parallel.h"

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/log.h"
#include "core/status.h"
#include "ep/expert_counts_text.h"
#include "ep/expert_frame.h"
#include "ep/replica_plan.h"
#include "ep/shm_channel.h"
#include "ep/ucx_channel.h"
#include "net/host_port.h"
#include "proc/child_exit.h"
#include "proc/child_launch.h"

namespace keel::host {
namespace {

using std::chrono::milliseconds;

milliseconds ms(double seconds) { return milliseconds(static_cast<int64_t>(seconds * 1000)); }

// Whether child `pid` still runs: false once it has exited. It is not reaped here (WNOWAIT):
// stop_children reaps it, so its pid cannot be reused while we may still signal it.
std::function<bool()> still_running(pid_t pid) {
  return [pid] {
    siginfo_t info{};
    return waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid == 0;
  };
}

// exit_on_loss: no request of this process is failed; its JEs re-drive them once it is gone, and
// its manager replaces the whole gang (this process starts new members).
std::function<void(const Status&)> exit_on_member_loss(std::vector<pid_t> members) {
  return [members](const Status& why) {
    KEEL_LOG_ERROR(
        "expert parallelism: {}: exiting (status {}) so that this TE's requests are re-driven "
        "and the TE replaced",
        why.to_string(), kExpertLostExit);
    for (pid_t pid : members) ::kill(pid, SIGKILL);  // ours, maybe hung: stopped by pid
    spdlog::default_logger()->flush();
    std::_Exit(kExpertLostExit);
  };
}

}  // namespace

Status ExpertParallelOptions::validate() const {
  if (shards < 1 || shards > 8) {
    return Status::invalid_argument("--ep must be in [1, 8], got " + std::to_string(shards));
  }
  if (!(step_timeout_s > 0) || !(start_timeout_s > 0)) {
    return Status::invalid_argument("expert-parallel timeouts must be > 0");
  }
  if (member_threads < 0) return Status::invalid_argument("member threads must be ≥ 0");
  if (remote_members.size() > static_cast<size_t>(shards - 1)) {
    return Status::invalid_argument(
        "--ep " + std::to_string(shards) + " has " + std::to_string(shards - 1) + " members, but " +
        std::to_string(remote_members.size()) + " --ep-remote addresses were given");
  }
  for (const std::string& a : remote_members) {
    KEEL_TRY(net::parse_host_port(a).status().with_prefix("--ep-remote"));
  }
  if (replicas < 0 || replicas > 64) {
    return Status::invalid_argument("--ep-replicas must be in [0, 64]");
  }
  if ((replicas > 0) != !counts_path.empty()) {
    return Status::invalid_argument(
        "--ep-replicas and --ep-counts go together: the copies are planned from the counts");
  }
  if (replicas > 0 && shards < 2) return Status::invalid_argument("--ep-replicas needs --ep ≥ 2");
  return Status();
}

Result<std::optional<model::ExpertPlacement>> plan_expert_placement(
    const ExpertParallelOptions& options) {
  KEEL_TRY(options.validate());
  if (options.replicas == 0) return std::optional<model::ExpertPlacement>();
  auto read = ep::read_expert_counts(options.counts_path);
  if (!read.ok()) return read.error().with_prefix("--ep-counts");
  const ep::ExpertCountsGrid& grid = *read;
  KEEL_ASSIGN_OR_RETURN(model::ExpertPlacement placement,
                        ep::plan_replicas({grid.n_layer, grid.n_expert, grid.counts, options.shards,
                                           options.replicas}));
  double before = 0, after = 0;
  const model::ExpertPlacement none =
      *model::ExpertPlacement::make(options.shards, grid.n_layer, grid.n_expert, {});
  for (int64_t l = 0; l < grid.n_layer; ++l) {
    before = std::max(before, ep::shard_imbalance(none, grid.counts, l));
    after = std::max(after, ep::shard_imbalance(placement, grid.counts, l));
  }
  KEEL_LOG_INFO(
      "expert parallelism: {} hot-expert copies planned from {} ({} per process and layer at "
      "most); the busiest process's share of a layer's tokens over the mean, worst layer: {:.3f} "
      "→ {:.3f}",
      placement.replicas().size(), options.counts_path, options.replicas, before, after);
  return std::optional<model::ExpertPlacement>(std::move(placement));
}

Result<std::unique_ptr<ExpertMembers>> ExpertMembers::start(
    const ExpertParallelOptions& options, const std::string& model_path, const model::Model& model,
    int threads, int64_t max_rows, std::optional<model::ExpertPlacement> placement) {
  KEEL_TRY(options.validate());
  const model::HParams& hp = model.hparams();
  if (!hp.is_moe()) return Status::invalid_argument("--ep needs a mixture-of-experts model");
  if (placement &&
      (placement->n_layer() != hp.n_layer || placement->n_expert() != hp.moe.n_expert ||
       placement->shards() != options.shards)) {
    return Status::invalid_argument(
        "--ep-counts holds counts for " + std::to_string(placement->n_layer()) + " layers of " +
        std::to_string(placement->n_expert()) + " experts; the model has " +
        std::to_string(hp.n_layer) + " layers of " + std::to_string(hp.moe.n_expert));
  }
  if (model.expert_shard().index != 0 || model.expert_shard().count != options.shards) {
    return Status::internal("the leader's model was not loaded as shard 0 of --ep");
  }
  std::unique_ptr<ExpertMembers> m(new ExpertMembers());
  m->overlap_ = options.overlap;
  m->ping_pong_ = options.ping_pong;
  m->placement_ = std::move(placement);
  const int64_t k = hp.moe.n_expert_used;
  const size_t request = ep::work_frame_bytes(max_rows, max_rows * k, hp.n_embd);
  const size_t reply = std::max(ep::outputs_frame_bytes(max_rows * k, hp.n_embd), size_t{8192});
  const int member_threads = options.member_threads > 0 ? options.member_threads : threads;
  std::vector<ep::MemberLink> links;
  const int remote = static_cast<int>(options.remote_members.size());
  for (int i = 1; i <= remote; ++i) {
    const std::string& address = options.remote_members[static_cast<size_t>(i - 1)];
    KEEL_ASSIGN_OR_RETURN(
        std::unique_ptr<ep::UcxChannel> ch,
        ep::UcxChannel::connect(address, request,
                                std::min(ms(options.start_timeout_s), milliseconds(30000))));
    links.push_back(
        {std::move(ch), i, {}, "expert member " + std::to_string(i) + " (" + address + ")"});
  }
  for (int i = remote + 1; i < options.shards; ++i) {
    KEEL_ASSIGN_OR_RETURN(std::unique_ptr<ep::ShmChannel> ch,
                          ep::ShmChannel::create(request, std::max(reply, request / 4)));
    proc::LaunchSpec spec;
    spec.argv = {options.program.empty() ? proc::self_exe() : options.program,
                 "ep-expert",
                 "--model",
                 model_path,
                 "--shard",
                 std::to_string(i) + "/" + std::to_string(options.shards),
                 "--channel",
                 ch->name(),
                 "--threads",
                 std::to_string(member_threads)};
    KEEL_ASSIGN_OR_RETURN(const proc::LaunchedChild child, proc::launch_child(spec));
    Child c{child.pid, std::make_unique<proc::OutputDrain>(
                           child.stdout_fd, child.stderr_fd, [i](std::string_view line) {
                             KEEL_LOG_INFO("ep-expert {}: {}", i, line);
                           })};
    m->children_.push_back(std::move(c));
    links.push_back(
        {std::move(ch), i, still_running(child.pid),
         "expert member " + std::to_string(i) + " (pid " + std::to_string(child.pid) + ")"});
  }
  std::function<void(const Status&)> on_lost;
  if (options.exit_on_loss) on_lost = exit_on_member_loss(m->pids());
  KEEL_ASSIGN_OR_RETURN(m->remote_,
                        ep::ChannelRemoteExperts::connect(
                            std::move(links), model, options.shards, static_cast<int32_t>(max_rows),
                            ms(options.start_timeout_s), ms(options.step_timeout_s), on_lost,
                            m->placement_ ? &*m->placement_ : nullptr));
  for (int i = 1; i <= remote; ++i) {
    KEEL_LOG_INFO("expert parallelism: expert member {} ({}) ready", i,
                  options.remote_members[static_cast<size_t>(i - 1)]);
  }
  for (size_t i = 0; i < m->children_.size(); ++i) {
    KEEL_LOG_INFO("expert parallelism: expert member {} (pid {}) ready", i + 1 + remote,
                  m->children_[i].pid);
  }
  KEEL_LOG_INFO("expert parallelism: {} of {} experts here, overlap {}",
                (hp.moe.n_expert + options.shards - 1) / options.shards, hp.moe.n_expert,
                options.overlap ? "on" : "off");
  return m;
}

std::vector<pid_t> ExpertMembers::pids() const {
  std::vector<pid_t> out;
  for (const Child& c : children_) out.push_back(c.pid);
  return out;
}

void ExpertMembers::stop_children() {
  for (Child& c : children_) {
    if (c.pid > 0 && !proc::reap_within(c.pid, milliseconds(2000))) {
      ::kill(c.pid, SIGTERM);
      if (!proc::reap_within(c.pid, milliseconds(5000))) {
        ::kill(c.pid, SIGKILL);
        (void)proc::reap_within(c.pid, milliseconds(5000));
      }
    }
    if (c.drain) c.drain->finish();
  }
  children_.clear();
}

ExpertMembers::~ExpertMembers() {
  if (remote_) {
    const ep::RemoteExpertsStats s = remote_->stats();
    KEEL_LOG_INFO(
        "expert parallelism: {} remote calls, {} slots; round trip {:.3f} s, member compute "
        "{:.3f} s, exchange {:.3f} s, waited in collect {:.3f} s, exchange exposed {:.3f} s",
        s.calls, s.slots, s.round_trip_s, s.member_compute_s, s.round_trip_s - s.member_compute_s,
        s.collect_wait_s, s.exposed_s);
    std::string spread = std::to_string(local_slots_.load());
    for (const int64_t n : s.member_slots) spread += " / " + std::to_string(n);
    KEEL_LOG_INFO("expert parallelism: slots computed by the leader / each member: {}{}", spread,
                  placement_ ? " (hot experts replicated)" : "");
    KEEL_LOG_INFO("expert parallelism: {} forward passes as two ping-pong micro-batches",
                  ping_pong_passes_.load());
  }
  remote_.reset();  // says goodbye: members exit on their own
  stop_children();
}

}  // namespace keel::host
