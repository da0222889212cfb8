// SemiPdRequest and SemiPdShared: what semi-PD's two workers pass between them and what they
// share. A request is owned by exactly one worker at a time (held by unique_ptr; it moves from
// prefill to decode at hand-off, and back on a preemption), and with it move its block table and
// sampler: a hand-off copies no KV bytes and takes or returns no block.
// SemiPdShared is owned by the SemiPdEngine and borrowed by both workers; what in it is mutable
// is thread-safe (the block allocator, the atomic metrics, the callbacks' own locking) — the KV
// bytes are written only by the worker holding a block's references.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/engine_config.h"
#include "engine/metrics.h"
#include "engine/stop_strings.h"
#include "engine/types.h"
#include "kv/shared_block_allocator.h"
#include "model/expert_token_counts.h"
#include "model/kv_storage.h"
#include "model/model.h"
#include "sampling/sampler.h"

namespace keel::engine {

// A finished prefill's hand-off as the two sides saw it (SemiPdShared::on_hand_off; tests).
struct SemiPdHandOff {
  RequestKey key = 0;
  std::vector<kv::BlockId> prefill_blocks;  // the table prefill wrote, as it sent it
  int32_t allocated_sent = 0;               // pool blocks allocated as prefill sent it
  std::vector<kv::BlockId> decode_blocks;   // the table decode received
  int32_t allocated_received = 0;           // pool blocks allocated as decode received it
};

struct SemiPdRequest {
  RequestKey key = 0;
  GenerationRequest request;
  std::shared_ptr<OutputSink> sink;
  std::unique_ptr<sampling::Sampler> sampler;
  std::unique_ptr<StopStringDetector> stops;     // request.stop_strings; null = none
  std::shared_ptr<std::atomic<bool>> cancelled;  // set by SemiPdEngine::abort from any thread
  std::vector<int32_t> tokens;  // prompt + generated; once generating, the last one's K/V is
                                // not computed yet (the next step computes it)
  int32_t num_computed = 0;     // positions [0, num_computed) hold K/V in `blocks`
  int32_t num_generated = 0;
  std::vector<kv::BlockId> blocks;  // the block table (one reference each)
  int64_t arrival_ns = 0;
  int64_t first_token_ns = 0;  // 0 until the first token
  int64_t last_token_ns = 0;
  std::unique_ptr<SemiPdHandOff> probe;  // tests (on_hand_off set): prefill's view in transit
};

struct SemiPdShared {
  const model::Model* model = nullptr;
  model::KvStorage* storage = nullptr;
  kv::SharedBlockAllocator* blocks = nullptr;
  const EngineConfig* config = nullptr;  // eog ids, block size, scheduler caps, max_model_len
  Metrics* metrics = nullptr;
  model::ExpertTokenCounts* expert_counts = nullptr;  // an MoE model's routing; null for dense
  Histogram* switch_seconds = nullptr;                // keel:semi_pd_switch_seconds
  // A request's final event was sent (any worker thread): the engine forgets it.
  std::function<void(const SemiPdRequest&)> on_finished;
  // A request's first token was sampled (TTFT) — for the controller's window.
  std::function<void(double ttft_seconds)> on_first_token;
  // A prefill step ran (prefill worker): its seconds × the worker's cores, and the prefills it
  // completed — the controller's λ′ inputs.
  std::function<void(double core_seconds, int32_t completed)> on_prefill_step;
  // Tests: each hand-off, seen by decode on receipt. Empty: none.
  std::function<void(const SemiPdHandOff&)> on_hand_off;
};

}  // namespace keel::engine
