// The `keel je` process (see je_process.h).
#include "executors/je_process.h"

#include <unistd.h>

#include <memory>
#include <string>

#include "cluster/job/job_executor.h"
#include "cluster/job/pd_heatmap.h"
#include "cluster/job/router.h"
#include "control/manager/cluster_membership.h"
#include "core/file_system.h"
#include "core/log.h"
#include "engine/model_identity.h"
#include "engine/named_lora.h"
#include "host/compute.h"
#include "membership/member_follower.h"
#include "model/lora_summary.h"
#include "predictor/length_predictor.h"
#include "proc/ready_line.h"

namespace keel::executors {
namespace {

// The JE's side of the membership: every TE registered for `model` joins its fleet (add_te; one it
// already has is left as it is), and one whose lease expires or that deregisters leaves it
// (te_gone: out of routing, its jobs re-driven).
Result<std::unique_ptr<membership::MemberFollower>> follow_tes(membership::Membership& session,
                                                               cluster::JobExecutor& je,
                                                               const std::string& model) {
  membership::FollowerCallbacks cb;
  cb.added = [&je](const membership::Member& m) {
    const Status s = je.add_te(m.address);
    if (!s.ok() && s.code() != StatusCode::kInvalidArgument) {  // InvalidArgument: known already
      KEEL_LOG_WARN("je: te {} ({}) from the membership not added: {}", m.id, m.address,
                    s.to_string());
    }
  };
  cb.removed = [&je](const membership::Member& m) {
    const Status s = je.te_gone(m.address);
    if (!s.ok()) KEEL_LOG_WARN("je: te {} left: {}", m.id, s.to_string());
  };
  return membership::MemberFollower::start(
      &session, membership::MemberKind::kTaskExecutor,
      [model](const membership::Member& m) {
        const auto it = m.attributes.find("model");
        return it != m.attributes.end() && it->second == model;
      },
      std::move(cb));
}

}  // namespace

Status run_job_executor(const cluster::JeSpec& spec, const sigset_t& stop_signals) {
  if (spec.served_model_name.empty()) {
    return Status::invalid_argument("je: no served model name");
  }
  cluster::JobExecutorConfig config;
  config.id = spec.id;
  config.host = spec.host;
  config.port = static_cast<uint16_t>(spec.port);
  config.te_addresses = spec.tes;
  config.stall_timeout = std::chrono::milliseconds(spec.stall_timeout_ms);
  config.submit_delay = std::chrono::milliseconds(spec.submit_delay_ms);
  config.max_jobs_per_te = spec.max_jobs_per_te;
  config.admission_wait = std::chrono::milliseconds(spec.admission_wait_ms);
  config.kv_pin_ttl = std::chrono::milliseconds(static_cast<int64_t>(spec.kv_pin_ttl_s * 1000));
  config.connect_timeout = std::chrono::milliseconds(spec.te_connect_timeout_ms);
  config.model = spec.served_model_name;
  const std::string model_name = config.model;
  config.block_size = spec.block_size;
  config.router.policy =
      cluster::parse_route_policy(spec.router).value_or(cluster::RoutePolicy::kDeepServe);
  config.router.balance_threshold = spec.balance_threshold;
  config.router.balance_abs_tokens = spec.balance_abs_tokens;
  KEEL_TRY(config.router.validate());
  KEEL_ASSIGN_OR_RETURN(config.model_key, engine::model_identity_of_file(spec.model_path));
  for (const std::string& named : spec.loras) {
    KEEL_ASSIGN_OR_RETURN(engine::NamedLora adapter, engine::parse_named_lora(named));
    KEEL_ASSIGN_OR_RETURN(model::LoraSummary lora, model::summarize_lora(adapter.path));
    config.lora_keys[adapter.name] = engine::lora_prefix_key(config.model_key, lora.content_digest);
  }
  if (!spec.pd_heatmap.empty()) {
    PosixFileSystem fs;
    KEEL_ASSIGN_OR_RETURN(cluster::PdHeatmap heatmap,
                          cluster::PdHeatmap::load(fs, spec.pd_heatmap));
    config.heatmap = std::move(heatmap);
  }
  std::shared_ptr<predictor::LengthPredictor> lengths;
  if (!spec.predictor.empty()) {
    KEEL_ASSIGN_OR_RETURN(host::ComputeSetup compute, host::setup_compute({.threads = 1}));
    KEEL_ASSIGN_OR_RETURN(
        lengths,
        predictor::LengthPredictor::load(
            spec.predictor, spec.predictor_model.empty() ? spec.model_path : spec.predictor_model,
            compute.isa));
    config.predict = [lengths](std::span<const int32_t> prompt)
        -> Result<cluster::JobExecutorConfig::DecodePrediction> {
      KEEL_ASSIGN_OR_RETURN(predictor::LengthPrediction p, lengths->predict(prompt));
      return cluster::JobExecutorConfig::DecodePrediction{p.bucket, p.predicted_tokens};
    };
    config.bucket_of = [lengths](int64_t generated) {
      return lengths->buckets().bucket_of(static_cast<int32_t>(generated));
    };
  }
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<cluster::JobExecutor> je,
                        cluster::JobExecutor::start(std::move(config)));
  KEEL_LOG_INFO("je {}: {} TEs, router {}, listening at {}", spec.id, spec.tes.size(), spec.router,
                je->address());
  const membership::Member self{membership::MemberKind::kJobExecutor,
                                spec.id,
                                je->address(),
                                {{"model", model_name}, {"pid", std::to_string(getpid())}}};
  const control::MembershipConfig membership =
      control::MembershipConfig::from_spec(spec.membership);
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<control::ClusterMembership> member,
                        control::register_self(membership, self));
  std::unique_ptr<membership::MemberFollower> follower;
  if (member) {
    KEEL_ASSIGN_OR_RETURN(follower, follow_tes(member->session(), *je, model_name));
  }
  KEEL_TRY(proc::print_ready_line(
      {{"role", "je"}, {"id", spec.id}, {"port", je->port()}, {"pid", getpid()}}));
  // A lost lease: the follower goes with the old session and a new one follows the new session
  // (it lists the TEs registered now; those that left meanwhile are found dead by the health
  // check).
  const int sig = control::wait_registered(
      stop_signals, membership, self, &member,
      [&] {
        if (follower) follower->stop();
        follower.reset();
      },
      [&](control::ClusterMembership& again) {
        Result<std::unique_ptr<membership::MemberFollower>> f =
            follow_tes(again.session(), *je, model_name);
        if (f.ok()) {
          follower = std::move(*f);
        } else {
          KEEL_LOG_ERROR("je {}: cannot follow the TEs again: {}", spec.id, f.status().to_string());
        }
      });
  KEEL_LOG_INFO("je {}: signal {}: stopping", spec.id, sig);
  if (follower) follower->stop();
  je->stop();
  if (member) (void)member->close();
  return {};
}

}  // namespace keel::executors
