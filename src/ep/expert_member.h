// serve_expert_member: the loop of an expert member (`keel ep-expert`), the process of an
// expert-parallel instance that holds one shard of an MoE model's experts and nothing else
// (model::ExpertShard with experts_only). It answers its leader's frames on an ExpertChannel:
// kHello → kReady when the leader's model shape and shard equal its own (else kError, and it
// keeps waiting for a correct hello) — when the hello names other replicas (hot experts copied
// here, model/expert_placement.h) than it holds, it first reloads its experts through
// ExpertMemberOptions::reload (without one it refuses); kWork → each slot's expert output
// (MoeFfn::run_slots over its own weights, bit for bit what the leader would compute) as kOutputs,
// or kError for a frame that does not decode, arrives before the hello, or names an expert it does
// not hold; kBye → returns OK. It also returns, with Unavailable, when `leader_alive` says the
// leader is gone. A listening member (keep_serving: `keel ep-expert --listen`) serves leader after
// leader: a goodbye ends nothing, and each hello may raise the batch size it accepts.
//
// Thread safety: runs on the caller's thread; `ops` is its own.
#pragma once

#include <chrono>
#include <functional>

#include "core/result.h"
#include "core/status.h"
#include "ep/expert_channel.h"
#include "ep/expert_frame.h"
#include "kernels/kernels.h"
#include "model/model.h"

namespace keel::ep {

struct ExpertMemberOptions {
  std::function<bool()> leader_alive;          // asked while idle (empty: assumed alive)
  std::chrono::milliseconds idle_slice{1000};  // how often an idle member asks it
  bool keep_serving = false;                   // kBye does not return (a listening member)
  // Replaces the member's model with one loaded for `shard` (its range plus other replicas) and
  // returns it; the previous model may be freed first. On an error the member holds no model and
  // answers work with an error until a hello's reload succeeds. Empty: replicas are refused.
  std::function<Result<const model::Model*>(const model::ExpertShard& shard)> reload;
};

// The EpHello a leader sends and a member of `model` expects (model_bytes: the file's size), with
// the replicas of `model`'s own shard.
[[nodiscard]] EpHello hello_for(const model::Model& model, int32_t shard_index, int32_t shard_count,
                                int32_t max_rows);

Status serve_expert_member(const model::Model& model, ExpertChannel& channel, kernels::Ops& ops,
                           const ExpertMemberOptions& options);

}  // namespace keel::ep
