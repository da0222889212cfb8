// EngineRequest: the engine's one record of a request, from submit until no launched step uses it
// any more — what the caller asked (GenerationRequest), where its events go, its sampler, its
// timings, the state of the features it uses (stop strings, PIC, sparse decode, early exit) and
// the scheduler's part (RequestState), which the Scheduler borrows while it schedules the request
// (Scheduler::add(RequestState*) until finish, abort or retain). There is no second record: the
// engine reads the scheduler's fields (prefix hit, preemptions) here, not by looking them up.
//
// Thread safety: the engine thread's. The executor thread uses `sampler` during a step that
// includes the request (never concurrently with the engine thread touching it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/early_exit_params.h"
#include "engine/exit_layer_schedule.h"
#include "engine/request_state.h"
#include "engine/sparse_decode.h"
#include "engine/stop_strings.h"
#include "engine/types.h"
#include "kv/block_hash.h"
#include "kv/pic.h"
#include "model/lora_adapter.h"
#include "sampling/sampler.h"

namespace keel::engine {

// EPIC (engine_pic.cpp): a compile request (internal: no sink, no metrics) computes one chunk of
// its parent alone; the parent waits outside the scheduler until every child finished.
struct PicRequestPart {
  bool internal = false;
  RequestKey parent = 0;             // a compile request's parent
  std::vector<RequestKey> children;  // a parent's chunks: compile requests or indexed chunks
  int pending = 0;                   // children not finished yet
  bool failed = false;               // a child did not complete: the parent is computed in full
  kv::PicVariant variant;
  kv::BlockHash chunk_hash;  // a compile request: its chunk's key in the chunk index
};

// SpecEE early exit (early_exit_hook.h): the resolved parameters, the request's layer schedule and
// the feature of its last emitted position (empty until its first step); the draft head's last
// proposal with its candidates (StepOutput::Proposal), which a verification of a prefix of those
// drafts gives its rows.
struct EarlyExitPart {
  EarlyExitParams params;
  std::optional<ExitLayerSchedule> schedule;
  std::vector<float> feature;
  std::vector<int32_t> drafts, candidates;
};

struct EngineRequest {
  GenerationRequest request;
  std::shared_ptr<OutputSink> sink;  // null for an internal request
  std::unique_ptr<sampling::Sampler> sampler;
  // The scheduler's part: key, tokens, KV progress, preemptions, the prefix hit. Fixed address
  // (the engine's map keeps its nodes) while the scheduler borrows it.
  RequestState sched;
  int32_t num_generated = 0;
  int32_t num_cached_tokens = -1;  // prompt tokens from the prefix cache; -1 until scheduled
  int64_t arrival_ns = 0;
  int64_t first_token_ns = 0;
  int64_t last_token_ns = 0;
  int64_t cache_blocks = 0;  // retain_as: blocks reserved in the engine's cache quota
  std::shared_ptr<const model::LoraAdapter> lora;  // held until the request is erased
  int in_flight = 0;                               // launched steps that include this request
  bool finished = false;                           // its final event was sent
  std::unique_ptr<StopStringDetector> stops;       // request.stop_strings; null = none
  std::unique_ptr<SparseSequence> sparse;          // sparse decode state; null = dense
  PicRequestPart pic;
  EarlyExitPart exit;

  [[nodiscard]] RequestKey key() const { return sched.key; }
};

}  // namespace keel::engine
