// EngineConfig: everything that shapes one engine — scheduling limits, KV cache size and type,
// prefix caching, schedule-ahead, compute threads and kernel table. validate() names the first bad
// field. The CLI (`keel serve`) and tests fill it; the engine only reads it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "core/status.h"
#include "engine/scheduler.h"
#include "engine/semi_pd_split.h"
#include "kernels/kernels.h"
#include "kv/kv_pins.h"
#include "kv/pic.h"
#include "sparse/sparse_policy.h"

namespace keel::model {
struct KvLayout;
}  // namespace keel::model

namespace keel::engine {

struct EngineConfig {
  SchedulerConfig scheduler;        // --max-num-seqs, --max-batched-tokens, --max-waiting
  int32_t block_size = 16;          // --block-size: tokens per KV block
  int64_t kv_cache_bytes = 0;       // --kv-cache-bytes; 0 = room for max_num_seqs full contexts,
                                    // capped at kDefaultKvCacheCapBytes
  DType kv_dtype = DType::kF32;     // --kv-type f32 | f16 | q8_0 (model::is_kv_type)
  bool enable_prefix_cache = true;  // --no-prefix-cache turns it off
  int64_t kv_host_bytes = 0;        // --kv-host-bytes: T1 host-DRAM tier size; 0 = no T1
  std::string kv_disk_dir;          // --kv-disk-dir: T2 disk tier directory; empty = no T2
  int64_t kv_disk_bytes = 0;        // --kv-disk-bytes: T2 capacity (needs a directory)
  bool schedule_ahead = true;       // plan step N+1 while step N computes (--no-schedule-ahead)
  // --step-time-target-ms: the time a step that decodes may take with its prefill chunk; the
  // chunk is sized from measured step costs (StepCostModel). 0 = auto: kAutoStepFactor × the
  // predicted decode-only step, at least kMinStepTargetSeconds. Negative: no limit (chunks
  // take all that decodes leave of max_batched_tokens).
  double step_time_target_s = 0;
  static constexpr double kAutoStepFactor = 4.0;
  static constexpr double kMinStepTargetSeconds = 0.05;
  static constexpr int32_t kMinPrefillChunk = 16;
  int threads = 0;                           // compute threads; 0 = all hardware threads
  kernels::Isa isa = kernels::Isa::kScalar;  // kernel table (the CLI picks the best supported)
  std::vector<int32_t> eog_token_ids;        // end-of-generation tokens of the vocabulary
  // --pic-link: how requests with position-independent chunks are linked when they do not say
  // (full, naive, legolink-K or cacheblend-R).
  kv::PicVariant pic_link;
  // --sparse-policy / --sparse-budget: sparse decode for requests that do not say; the tuning's
  // alpha, sink/window sizes and dense layers apply to every sparse request (its page_size is
  // the block size and its budget the request's).
  SparseParams sparse;
  sparse::SparseConfig sparse_tuning;
  // --speculative ngram|draft-head|draft-model / --spec-k: speculative decoding for requests that
  // do not say (off by default: method kNone).
  SpeculativeParams speculative;
  // --early-exit: SpecEE early exit for requests that do not say (off by default).
  EarlyExitParams early_exit;
  // --exit-predictors: the exit predictor file (keel train-exit), loaded at start (an error there
  // fails the start). "" = draft::default_exit_path(model file) when that file exists (a bad one
  // is then only logged, and early-exit requests are refused). Early exit also needs the draft
  // head (its candidates).
  std::string exit_predictors_path;
  // --mode semi-pd --semi-pd-split X,Y: run as semi-PD (engine/semi_pd_engine.h) — a prefill and
  // a decode worker on X and Y cores over one KV pool; unset = colocated (engine/engine.h).
  std::optional<SemiPdSplit> semi_pd;
  // --draft-head: the draft head file (keel train-draft) for "draft-head" speculation, loaded at
  // start (an error there fails the start). "" = draft::default_draft_head_path(model file) when
  // that file exists (a bad one is then only logged, and draft-head requests are refused).
  std::string draft_head_path;
  // --draft-model: a smaller model with the same vocabulary for "draft-model" speculation
  // (draft/draft_model.h), loaded at start; a file that cannot be loaded or whose vocabulary
  // differs fails the start. "" = none (draft-model requests are refused). Its KV pool holds as
  // many positions as the engine's pool, plus a block per sequence for the drafts.
  std::string draft_model_path;

  // KV kept across tool calls (docs/agent-kv.md; GenerationRequest::keep_kv): a finished call
  // that ended in a tool call keeps its blocks pinned for kv_pin_ttl_s (--kv-pin-ttl; 0 = off),
  // then they are ordinary cached blocks (LRU, demoted to the tiers). Distinct pinned blocks stay
  // within kv_pin_max_fraction of the pool (--kv-pin-max-fraction; 0 = no pins) and, for a named
  // tenant, kv_pin_tenant_max_fraction (--kv-pin-tenant-max-fraction; 0 = no cap of its own);
  // past a cap the oldest pin goes.
  double kv_pin_ttl_s = 60.0;
  double kv_pin_max_fraction = 0.25;
  double kv_pin_tenant_max_fraction = 0.125;

  static constexpr int64_t kDefaultKvCacheCapBytes = int64_t{2} << 30;

  [[nodiscard]] Status validate() const;
};

// The KV pool's size in blocks of `layout` for contexts of `max_len` tokens: kv_cache_bytes, or
// when 0 room for max_num_seqs full contexts capped at kDefaultKvCacheCapBytes. Fewer than 2
// blocks is InvalidArgument. Shared by the colocated and the semi-PD engine.
[[nodiscard]] Result<int32_t> kv_pool_blocks(const EngineConfig& config, int64_t max_len,
                                             const model::KvLayout& layout);

// The session pins' TTL and caps (kv/kv_pins.h) for a pool of `num_blocks` blocks.
[[nodiscard]] kv::KvPinLimits kv_pin_limits(const EngineConfig& config, int32_t num_blocks);

}  // namespace keel::engine
