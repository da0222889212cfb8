// The node agent's control messages (`keel node-agent`, docs/cluster.md "Node agents"): the
// cluster manager asks a host's agent over a Link (link.h: MessagePack frames) to start or stop
// one task executor there. Plain structs, one codec each; every decode checks types and ranges
// and names the bad field.
//
//   manager → agent  start_te (a call; StartTe, the reply StartTeReply): start TE `id` serving
//                    `model_path` (a warm TE from the host's pool is bound when one is idle, else
//                    a TE is cold-started); the reply carries its control address and pid.
//   manager → agent  stop_te (a call; StopTe, the reply a status_body): stop TE `id` (SIGTERM,
//                    drain, then SIGKILL after the grace), by the pid the agent started.
//   manager → agent  fence (a call; Fence, the reply a status_body): a manager that has just
//                    taken over announces its fencing token, so that its predecessor's later
//                    commands are refused at once (leader_fence.h).
// Every command carries the sender's election and fencing token (`election`, `fence`; 0 = sent
// outside any election); the agent refuses a token lower than the highest it has admitted for
// that election (FailedPrecondition).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/protocol/messages.h"
#include "cluster/protocol/te_spec.h"
#include "core/result.h"

namespace keel::cluster {

namespace msg {
inline constexpr std::string_view kStartTe = "start_te";
inline constexpr std::string_view kStopTe = "stop_te";
inline constexpr std::string_view kFence = "fence";
}  // namespace msg

// The StartTe role of a pipeline-parallel TE's stage 1: the agent starts `keel pp-stage` (no
// membership, no queue) and replies with its activation endpoint as the address.
inline constexpr std::string_view kPpStageRole = "pp-stage";
// The StartTe role of an expert-parallel TE's member (docs/moe.md): the agent starts `keel
// ep-expert --spec - --exit-with-leader` holding shard engine.ep_member of engine.ep (no
// membership, no queue), listening on the agent's host, and replies with its UCX endpoint; the
// member exits when its leader is gone.
inline constexpr std::string_view kEpExpertRole = "ep-expert";

struct StartTe {
  std::string id;                  // the TE's id in the fleet (unique in the cluster)
  std::string model_path;          // the GGUF, as the host sees it
  std::string served_model_name;   // the model's id in the API
  std::string role = "colocated";  // colocated | prefill | decode | pp-stage | ep-expert
  int32_t threads = 1;             // its compute threads
  std::string isa;                 // its kernel table; "" = the best the host runs
  // Its engine (te_spec.h); a pp-stage reads ctx and weights, an ep-expert ep, ep_member and
  // weights.
  TeEngineSpec engine;
  // For gang placement (gang_placement.h), reported back in the agent's capacity: the instance
  // (gang) the TE belongs to ("" = its own id), that instance's priority, the memory it reserves.
  std::string instance;
  int32_t priority = 0;
  int64_t memory_bytes = 0;
  std::string election;  // the sender's election (leader_fence.h)
  int64_t fence = 0;     // the sender's fencing token in it
  bool operator==(const StartTe&) const = default;
};

struct StartTeReply {
  Status status;
  std::string id;       // the TE's id (a bound warm TE keeps its pool name)
  std::string address;  // its control endpoint "host:port", as registered in the membership
  int64_t pid = 0;
  bool warm = false;  // bound from the warm pool
};

struct StopTe {
  std::string id;
  int32_t grace_ms = 10000;  // SIGTERM → SIGKILL
  std::string election;      // the sender's election
  int64_t fence = 0;         // the sender's fencing token in it
  bool operator==(const StopTe&) const = default;
};

struct Fence {
  std::string election;
  int64_t fence = 0;  // the new leader's fencing token in `election`
  bool operator==(const Fence&) const = default;
};

[[nodiscard]] net::Message encode(const StartTe& m);
[[nodiscard]] net::Message encode(const StopTe& m);
[[nodiscard]] net::Message encode(const Fence& m);
[[nodiscard]] Json encode_body(const StartTeReply& m);
[[nodiscard]] Result<StartTe> decode_start_te(const Json& body);
[[nodiscard]] Result<StopTe> decode_stop_te(const Json& body);
[[nodiscard]] Result<Fence> decode_fence(const Json& body);
[[nodiscard]] Result<StartTeReply> decode_start_te_reply(const Json& body);

}  // namespace keel::cluster
