// The cluster's internal messages — what gateways, job executors (JE) and task executors (TE) say
// to each other over links (link.h) — as plain structs, each with one encoder to a link Message
// and one total decoder (any body → the struct or InvalidArgument naming the field). Engine
// messages inside them (a GenerationRequest, a TokenEvent, EngineStats, MetricsSnapshot) travel as
// the engine's own wire encoding (engine/wire.h) in a binary field, so there is one codec for
// each engine type.
//
// Who sends what:
//   gateway → JE   submit_job (a call; the reply carries a Status and the chosen TE; a job whose
//                  JE died is submitted again, resumed, to another or the replacement JE),
//                  abort_job,
//                  fleet (a call; the reply is FleetStatus)
//   JE → TE        submit_task (a call; reply: Status), abort_task
//   gateway → JE   release_kv_job, and JE → TE release_kv_task (AbortTask's body): KV kept across
//                  tool calls — the job's turn did not end in a tool call, so the TE that ran it
//                  releases the pin its engine left (docs/agent-kv.md). One-way sends; a peer that
//                  predates them logs and ignores the type, and the pin ends at its TTL.
//   TE → JE        load_report (periodic: load, stats, metrics, each task's new tokens)
//   TE → gateway   task_event (one engine TokenEvent of one attempt of one job, with the index of
//                  its first generated token) — FlowServe's streaming shortcut past the JE
//   manager → JE   add_te (a call; body {"address": "host:port"}, the reply a Status): a TE
//                  bound from the warm pool joins the JE's fleet
//   manager → JE   remove_te (a call; RemoveTe, the reply a Status): the JE routes no new task to
//                  that TE (a drain before the autoscaler stops it); its jobs go on there, and are
//                  re-driven as for a dead TE if it stops with work left. With forget (the TE was
//                  stopped or replaced) the JE drops it from its fleet list.
//   TE → TE        kv_fetch (a call to a peer's fetch service: tier T3; the reply says how many
//                  blocks the peer pushed back over the KV transfer service)
//   JE → gateway   job_attempt (a job was re-driven: events of older attempts are stale),
//                  job_failed (no TE can run it: the gateway ends the request with an error)
// A job is named by (gateway id, job key); a re-drive is a new attempt of the same job.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/protocol/fleet.h"
#include "core/result.h"
#include "engine/types.h"
#include "kv/block_hash.h"
#include "net/link.h"

namespace keel::cluster {

using Json = nlohmann::json;

namespace msg {
inline constexpr std::string_view kSubmitJob = "submit_job";
inline constexpr std::string_view kAbortJob = "abort_job";
inline constexpr std::string_view kFleet = "fleet";
inline constexpr std::string_view kSubmitTask = "submit_task";
inline constexpr std::string_view kAbortTask = "abort_task";
inline constexpr std::string_view kLoadReport = "load_report";
inline constexpr std::string_view kTaskEvent = "task_event";
inline constexpr std::string_view kJobAttempt = "job_attempt";
inline constexpr std::string_view kJobFailed = "job_failed";
inline constexpr std::string_view kKvFetch = "kv_fetch";
inline constexpr std::string_view kAddTe = "add_te";
inline constexpr std::string_view kRemoveTe = "remove_te";
inline constexpr std::string_view kReleaseKvJob = "release_kv_job";
inline constexpr std::string_view kReleaseKvTask = "release_kv_task";
}  // namespace msg

struct JobRef {
  std::string gateway;  // the gateway's id (unique per gateway process)
  int64_t job = 0;      // the gateway's key for the request
  friend bool operator==(const JobRef&, const JobRef&) = default;
  friend auto operator<=>(const JobRef&, const JobRef&) = default;
};

// gateway → JE. reply_to: the gateway's event address ("host:port") TEs stream to.
// A job re-submitted because its JE died (fleet_client.h) carries the attempt to start from
// (above any its old JE may have left running: the new JE aborts those) and, as
// request.resumed_tokens, the tokens the client already has at the end of its prompt.
struct SubmitJob {
  JobRef ref;
  std::string reply_to;
  engine::GenerationRequest request;
  int32_t attempt = 0;  // encoded only when > 0
};

// Tier T3 (JE → TE, inside SubmitTask): another TE holds more of the prompt's leading blocks
// than the chosen one, per the JE's prefix index. The chosen TE may fetch blocks
// [skip_blocks, num_blocks) from it before computing the prompt (its cost model decides).
struct PeerHint {
  std::string te_id;        // the peer's id (logs)
  std::string address;      // the peer's KV fetch service ("host:port"); "" = no hint
  int32_t skip_blocks = 0;  // leading blocks the chosen TE holds itself
  int32_t num_blocks = 0;   // leading blocks the peer holds (> skip_blocks)
  friend bool operator==(const PeerHint&, const PeerHint&) = default;
};

// JE → TE: attempt `attempt` of job `ref`; request.resumed_tokens > 0 for a re-drive (and for
// the decode half of a disaggregated job, which continues after the prefill's token).
// prefill_only: the prefill half of a disaggregated job — the TE generates its one token, sends
// it to the gateway as a non-final event (unless it ended the request: a stop), then pushes the
// prompt's KV blocks to `transfer_to` (a decode TE's KV transfer address) before reporting the
// task finished.
struct SubmitTask {
  JobRef ref;
  int32_t attempt = 0;
  std::string reply_to;
  engine::GenerationRequest request;
  bool prefill_only = false;
  std::string transfer_to;
  PeerHint peer;  // address "" = none (encoded only when set)
};

// TE → TE (a call to the peer's KV fetch service): push the blocks `block_hashes` (prompt
// order; the first one's parent is `parent_hash`) that you hold for engine identity
// `kv_identity` to `reply_to` (the caller's KV transfer server), stopping at the first one you
// lack. probe_blocks > 0 (and no hashes): a link-cost probe — push that many dummy blocks under
// kPeerProbeHash (kv_peer_fetch.h), which the receiver drops. The reply: status_body plus
// {"blocks": blocks pushed and flushed}.
struct KvFetchRequest {
  kv::BlockHash kv_identity;
  kv::BlockHash parent_hash;
  std::vector<kv::BlockHash> block_hashes;
  std::string reply_to;
  int32_t probe_blocks = 0;
  friend bool operator==(const KvFetchRequest&, const KvFetchRequest&) = default;
};

// gateway → JE (attempt ignored) and JE → TE; also the body of release_kv_job / release_kv_task
// (the attempt: the one whose pin goes; the gateway's is ignored).
struct AbortTask {
  JobRef ref;
  int32_t attempt = 0;
};

// TE → gateway.
struct TaskEvent {
  int64_t job = 0;
  int32_t attempt = 0;
  int32_t first_index = 0;  // generated-token index of event.tokens[0] (counts resumed tokens)
  engine::TokenEvent event;
};

// One task's progress since the previous report (TE → JE, inside LoadReport).
struct TaskProgress {
  JobRef ref;
  int32_t attempt = 0;
  std::vector<int32_t> tokens;   // generated since the previous report, in order
  bool finished = false;         // its final event was sent
  bool ended_job = true;         // ... and it ended the request (false: a prefill handed off)
  bool kv_link_blocked = false;  // a prefill whose KV handoff found the link blocked
                                 // (kv_link_probe.h): the JE runs the rest on this TE
  friend bool operator==(const TaskProgress&, const TaskProgress&) = default;
};

// TE → JE, every report interval.
struct LoadReport {
  std::string te_id;
  TeRole role = TeRole::kColocated;
  std::string model;
  int64_t pid = 0;
  std::string kv_events;         // its cache-event PUB endpoint (vLLM's format); "" = none
  std::string kv_events_replay;  // ... and the replay endpoint
  std::string kv_transfer;       // a decode TE's KV transfer address ("host:port"); "" = none
  std::string kv_fetch;          // its KV fetch service (tier T3 peers fetch from it); "" = none
  bool semi_pd = false;          // its engine is semi-PD (TeInfo::semi_pd); absent = false
  int32_t pp_stages = 1;         // pipeline stages (TeInfo::pp_stages); absent = 1
  TeLoad load;
  int64_t max_model_len = 0;
  int64_t max_waiting = 0;
  engine::EngineStats stats;
  engine::MetricsSnapshot metrics;
  std::vector<TaskProgress> progress;
};

// JE → gateway.
struct JobAttempt {
  int64_t job = 0;
  int32_t attempt = 0;
};
struct JobFailed {
  int64_t job = 0;
  std::string error;
};

// manager → JE: drain the TE whose control address is `address` (host:port, as add_te named it or
// as its load reports' TeInfo.address says). forget: the TE is gone for good (replaced, or
// drained and stopped): the JE also drops it from its fleet list (its jobs, if any, are re-driven
// as for a dead TE); the address may later be added again.
struct RemoveTe {
  std::string address;
  bool forget = false;
  friend bool operator==(const RemoveTe&, const RemoveTe&) = default;
};

// One JE as the gateway sees it (fleet_merge.h): gateway-side only, never on the wire.
struct JeSummary {
  std::string id;       // its id ("je-0"); its address while it does not answer
  std::string address;  // "host:port"
  bool up = false;      // it answered the gateway's fleet call
  std::string error;    // why not, when down
  int64_t jobs_active = 0;
  int64_t jobs_total = 0;
  int64_t jobs_redriven = 0;
  int64_t jobs_failed = 0;
  int64_t jobs_resubmitted = 0;
  Json router;  // its router counters
};

// The reply to `fleet`: every TE the JE knows, its last stats and metrics, and the JE's counters.
// At the gateway, the fleet over every JE (merge_fleet_statuses): the TEs once, the counters
// summed, job_executors one entry per JE.
struct FleetStatus {
  std::string je_id;
  FleetSnapshot fleet;
  std::vector<engine::EngineStats> stats;        // parallel to fleet.tes
  std::vector<engine::MetricsSnapshot> metrics;  // parallel to fleet.tes
  int64_t jobs_active = 0;
  int64_t jobs_total = 0;
  int64_t jobs_redriven = 0;
  int64_t jobs_failed = 0;
  int64_t jobs_resubmitted = 0;  // jobs a gateway re-submitted after their JE died (attempt > 0)
  int64_t max_model_len = 0;     // the smallest over healthy TEs (0: none has reported)
  int64_t max_waiting = 0;       // summed over healthy TEs
  Json router;                   // the router's counters by branch ({"locality": n, ...})
  Json predictor;                // {"requests", "seconds", "buckets": [[predicted, actual, n]...]}
  std::vector<JeSummary> job_executors;  // gateway-side (merge_fleet_statuses); not encoded
};

[[nodiscard]] net::Message encode(const SubmitJob& m);
[[nodiscard]] net::Message encode(const SubmitTask& m);
[[nodiscard]] net::Message encode_abort_job(const AbortTask& m);
[[nodiscard]] net::Message encode_abort_task(const AbortTask& m);
[[nodiscard]] net::Message encode_release_kv_job(const AbortTask& m);
[[nodiscard]] net::Message encode_release_kv_task(const AbortTask& m);
[[nodiscard]] net::Message encode(const TaskEvent& m);
[[nodiscard]] net::Message encode(const LoadReport& m);
[[nodiscard]] net::Message encode(const JobAttempt& m);
[[nodiscard]] net::Message encode(const JobFailed& m);
[[nodiscard]] Json encode_body(const FleetStatus& m);
[[nodiscard]] net::Message encode(const KvFetchRequest& m);
[[nodiscard]] net::Message encode(const RemoveTe& m);

[[nodiscard]] Result<SubmitJob> decode_submit_job(const Json& body);
[[nodiscard]] Result<SubmitTask> decode_submit_task(const Json& body);
[[nodiscard]] Result<AbortTask> decode_abort(const Json& body);  // also release_kv_job / _task
[[nodiscard]] Result<TaskEvent> decode_task_event(const Json& body);
[[nodiscard]] Result<LoadReport> decode_load_report(const Json& body);
[[nodiscard]] Result<JobAttempt> decode_job_attempt(const Json& body);
[[nodiscard]] Result<JobFailed> decode_job_failed(const Json& body);
[[nodiscard]] Result<FleetStatus> decode_fleet_status(const Json& body);
[[nodiscard]] Result<KvFetchRequest> decode_kv_fetch(const Json& body);
[[nodiscard]] Result<RemoveTe> decode_remove_te(const Json& body);

// A call's outcome as a reply body ({"status": <engine wire Status>, ...extra}) and back.
[[nodiscard]] Json status_body(const Status& status);
[[nodiscard]] Status decode_status_body(const Json& body);

}  // namespace keel::cluster
