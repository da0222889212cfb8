// Expert parallelism for a hosted engine (`keel serve --ep N`): this process is the leader — it
// holds attention, the routers and experts of shard 0 (model::ExpertShard{0, N}) — and N - 1
// members, member i holding the i-th of N contiguous ranges of each layer's experts and nothing
// else. Members 1..R are the R `--ep-remote` addresses, `keel ep-expert --listen` processes
// already running on other hosts and reached over UCX (ep::UcxChannel); the rest are children this
// process starts by pid (stdout/stderr forwarded to our log, PR_SET_PDEATHSIG so that they die with
// us), reached over shared memory (ep::ShmChannel). The engine sees them all as one
// model::RemoteExperts (ep::ChannelRemoteExperts). With replicas (--ep-replicas R --ep-counts
// FILE), the hottest experts of each layer, by the counts of an earlier run, are also copied onto
// other processes (ep/replica_plan.h: R places per process and layer) and each step's tokens are
// spread over the copies (model/expert_placement.h); members load their copies when the hello
// names them. The instance is one gang: a member that
// dies fails the steps from then on (or, with exit_on_loss, ends this process so that a task
// executor's manager replaces the whole instance).
//
// Thread safety: ExpertMembers from the owner's thread; its remote experts from the engine's.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "ep/channel_remote_experts.h"
#include "model/expert_placement.h"
#include "model/expert_shard.h"
#include "model/model.h"
#include "model/remote_experts.h"
#include "proc/output_drain.h"

namespace keel::host {

struct ExpertParallelOptions {
  int shards = 1;          // --ep: 1 (every expert here) or 2..8 processes
  bool overlap = true;     // --ep-overlap: the local experts run while the members compute
  bool ping_pong = false;  // --ep-ping-pong: two micro-batches alternate (model/context.h)
  int member_threads = 0;  // a member's compute threads (0 = the leader's)
  std::string program;     // the keel binary members run ("" = /proc/self/exe)
  // --ep-remote: HOST:PORT of running `keel ep-expert --listen` members, shards 1, 2, … in order.
  std::vector<std::string> remote_members;
  int replicas = 0;              // --ep-replicas: hot-expert copies per process and layer (0-64)
  std::string counts_path;       // --ep-counts: the Prometheus scrape the replicas are planned from
  double step_timeout_s = 60;    // one layer's answer from a member
  double start_timeout_s = 600;  // a member loading its experts and saying ready
  // A member lost: false — the steps fail, their requests end with an error (`keel serve`);
  // true — this process stops its members (SIGKILL by pid) and exits with kExpertLostExit before
  // any request is failed (`keel te`: its JEs re-drive its jobs, its manager replaces the gang).
  bool exit_on_loss = false;

  [[nodiscard]] bool enabled() const { return shards > 1; }
  // The leader's shard of the model (without replicas).
  [[nodiscard]] model::ExpertShard leader_shard() const { return {0, shards, false, {}}; }
  // InvalidArgument unless 1 ≤ shards ≤ 8, the timeouts are positive, the remote members are
  // at most shards - 1 HOST:PORT addresses, and replicas and counts_path come together (with
  // shards > 1).
  [[nodiscard]] Status validate() const;
};

// The replicated experts planned from options.counts_path (nullopt without replicas). Errors: the
// file's (naming it), or the plan's.
Result<std::optional<model::ExpertPlacement>> plan_expert_placement(
    const ExpertParallelOptions& options);

// The exit status of a TE that lost an expert member (exit_on_loss); pipeline_stage.h's
// kStageLostExit, since both mean "my gang broke".
inline constexpr int kExpertLostExit = 3;

class ExpertMembers {
 public:
  // Connects to the remote members, starts the local ones for `model` (loaded from `model_path`
  // as shard 0 of options.shards, with placement's replicas when there is one) and connects to
  // them; max_rows: the engine's batch size. Errors: a member that cannot be reached, fails to
  // start, dies or refuses (its message), a placement of another shape than the model's,
  // Unavailable after start_timeout_s. Nothing is left running.
  static Result<std::unique_ptr<ExpertMembers>> start(
      const ExpertParallelOptions& options, const std::string& model_path,
      const model::Model& model, int threads, int64_t max_rows,
      std::optional<model::ExpertPlacement> placement = std::nullopt);
  ~ExpertMembers();  // goodbye to the members, then each stopped by pid (SIGTERM, SIGKILL), reaped
  ExpertMembers(const ExpertMembers&) = delete;
  ExpertMembers& operator=(const ExpertMembers&) = delete;

  [[nodiscard]] model::ExpertParallel expert_parallel() {
    return {remote_.get(), overlap_,   placement_ ? &*placement_ : nullptr,
            &local_slots_, ping_pong_, &ping_pong_passes_};
  }
  [[nodiscard]] const ep::ChannelRemoteExperts& remote() const { return *remote_; }
  [[nodiscard]] std::vector<pid_t> pids() const;

 private:
  struct Child {
    pid_t pid = 0;
    std::unique_ptr<proc::OutputDrain> drain;
  };
  ExpertMembers() = default;
  void stop_children();

  bool overlap_ = true;
  bool ping_pong_ = true;
  std::optional<model::ExpertPlacement> placement_;
  std::atomic<int64_t> ping_pong_passes_{0};  // forward passes run as two micro-batches
  std::atomic<int64_t> local_slots_{0};       // slots the leader computed itself
  std::vector<Child> children_;
  std::unique_ptr<ep::ChannelRemoteExperts> remote_;
};

}  // namespace keel::host
