// The JobExecutor's private records (job_executor.h): one per TE it routes to and one per job it
// owns. Internal to the files that implement JobExecutor (job_executor.cpp: membership, routing,
// dispatch; job_executor_failures.cpp: health and re-drives).
//
// Thread safety: every field is guarded by the JE's mu_, which a KEEL_GUARDED_BY here cannot name
// (a member of another object). The analysis checks the way in instead: the records are reached
// only through tes_ and jobs_, both KEEL_GUARDED_BY(mu_), and the helpers handed one are
// KEEL_REQUIRES(mu_). Not checked: a reference to a record must not be kept past the lock.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/job/job_executor.h"

namespace keel::cluster {

struct JobExecutor::TeEntry {
  std::string address;
  std::shared_ptr<net::Link> link;
  TeInfo info;
  engine::EngineStats stats;
  engine::MetricsSnapshot metrics;
  std::string kv_events, kv_events_replay;  // its announced publisher
  std::string kv_transfer;                  // a decode TE's KV transfer address
  std::string kv_fetch;                     // its KV fetch service (tier T3); "" = none
  bool subscribed = false;
  bool draining = false;   // remove_te: no new tasks (its jobs go on)
  bool forgotten = false;  // remove_te with forget: gone for good, not listed in the fleet
  int64_t max_model_len = 0;
  int64_t max_waiting = 0;
  bool reported = false;
  Clock::time_point last_report;
  Clock::time_point last_progress;
  int64_t last_steps = 0;
};

struct JobExecutor::Job {
  JobRef ref;
  std::shared_ptr<net::Link> gateway;
  std::string reply_to;
  engine::GenerationRequest request;        // as submitted (seed filled in)
  std::vector<uint64_t> block_hashes;       // of the submitted prompt, for the router
  std::optional<int32_t> predicted_bucket;  // the predictor's, when it ran
  int64_t predicted_tokens = 0;             // its decode-length estimate (max_tokens without)
  std::vector<int32_t> generated;           // tokens its TEs reported, in order
  int32_t attempt = 0;
  std::optional<size_t> te;         // the TE running its live attempt (or its prefill)
  std::optional<size_t> decode_te;  // a disaggregated job's decode TE
  bool aborted = false;
};

}  // namespace keel::cluster
