// Engine: one model served to many concurrent requests. A thread-safe facade (EngineClient) over
// an engine thread that owns every piece of mutable engine state — the scheduler, the KV cache
// manager and storage, the active requests — and learns of submits and aborts through an inbox.
// The forward pass and sampling of a step run on a separate executor thread (StepExecutor), so
// that with schedule-ahead the engine thread plans step N+1 while step N computes (FlowServe).
//
// Step cycle (engine thread):
//   inbox → scheduler.add/abort;  plan N = schedule();  launch N on the executor;
//   [schedule-ahead] plan N+1 = schedule() assuming every sampling seq of N yields a token;
//   wait N → update(N) → finish checks (stop strings, EOG, stop ids, max_tokens, context) →
//   TokenEvents;
//   prune plan N+1 of requests that finished or were aborted; launch N+1.
// A request that finishes at step N never has a token of step N+1 emitted.
//
// Thread safety: every public method may be called from any thread. OutputSink callbacks run on
// the engine thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <variant>

#include "core/file_system.h"
#include "core/mutex.h"
#include "core/thread_pool.h"
#include "draft/draft_head.h"
#include "draft/draft_model_runner.h"
#include "draft/exit_predictor_file.h"
#include "engine/chunk_index.h"
#include "engine/context_cache_table.h"
#include "engine/early_exit_hook.h"
#include "engine/engine_client.h"
#include "engine/engine_config.h"
#include "engine/engine_request.h"
#include "engine/exit_layer_schedule.h"
#include "engine/kv_connector.h"
#include "engine/lora_registry.h"
#include "engine/metrics.h"
#include "engine/pipeline_tail.h"
#include "engine/published_block_tap.h"
#include "engine/scheduler.h"
#include "engine/sparse_decode.h"
#include "engine/step_cost_model.h"
#include "engine/step_executor.h"
#include "engine/stop_strings.h"
#include "engine/tier_transfer.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_tiers.h"
#include "model/expert_token_counts.h"
#include "model/kv_storage.h"
#include "model/model.h"

namespace keel::grammar {
class GrammarRegistry;
}  // namespace keel::grammar

namespace keel::engine {

// What an engine uses besides its model and config.
struct EngineDeps {
  // The model's tokenizer, for stop strings (GenerationRequest::stop_strings); null: requests
  // with stop strings are refused. Must outlive the engine.
  const tokenizer::Tokenizer* tokenizer = nullptr;
  // The file system the disk KV tier uses (tests inject slow or faulty ones); null: POSIX.
  std::unique_ptr<FileSystem> fs;
  // Receives the prefix cache's index changes (kv/cache_event_log.h), oldest first, once per
  // engine step that had any, on the engine thread: it must not block (hand them to a queue —
  // cluster/kv_events/kv_event_convert.h's publishing sink does). Null: nothing is recorded.
  std::function<void(std::vector<kv::CacheEvent>)> cache_events;
  // Sees each block published in the prefix cache (published_block_tap.h). Empty: none.
  PublishedBlockTap published_blocks;
  // The draft head of "draft-head" speculation, bound to the engine's model. Null: start() loads
  // EngineConfig::draft_head_path (or the default file beside the model).
  std::shared_ptr<const draft::DraftHead> draft_head;
  // SpecEE's exit predictors, bound to the engine's model. Null: start() loads
  // EngineConfig::exit_predictors_path (or the default file beside the model).
  std::shared_ptr<const draft::ExitPredictorFile> exit_predictors;
  // Pipeline parallelism (pipeline_tail.h): the later stages; this engine then holds the K/V of
  // layers [0, tail->first_layer()) only and refuses what pipeline_checks.h lists. Borrowed: must
  // outlive the engine. Null: every layer here.
  PipelineTail* pipeline_tail = nullptr;
  // Expert parallelism (model/remote_experts.h): an MoE model loaded with an ExpertShard computes
  // its own experts and has `remote` compute the rest. Borrowed: must outlive the engine. A lost
  // member fails the steps (their requests end with an error). Not with a pipeline tail.
  model::ExpertParallel expert_parallel;
  // The draft model of "draft-model" speculation (draft/draft_model.h; its vocabulary is checked
  // against the engine's model). Null: start() loads EngineConfig::draft_model_path, if any.
  std::shared_ptr<const model::Model> draft_model;
};

class Engine final : public EngineClient {
 public:
  // Sizes the KV cache, starts the engine and executor threads. `model` must outlive the engine.
  static Result<std::unique_ptr<Engine>> start(const model::Model& model, EngineConfig config,
                                               EngineDeps deps = {});
  // As above, with the file system the disk KV tier uses and no tokenizer.
  static Result<std::unique_ptr<Engine>> start(const model::Model& model, EngineConfig config,
                                               std::unique_ptr<FileSystem> fs);
  ~Engine() override;  // aborts whatever is left and joins the threads

  Result<RequestKey> submit(GenerationRequest request, std::shared_ptr<OutputSink> sink) override;
  void abort(RequestKey key) override;
  bool release_cache(const std::string& id, const std::string& salt) override;
  void release_kv_pin(RequestKey key) override;  // engine_kv_pins.cpp
  [[nodiscard]] std::optional<ContextCacheInfo> find_cache(const std::string& id,
                                                           const std::string& salt) const override {
    return caches_.find(id, salt);
  }
  [[nodiscard]] std::vector<ContextCacheInfo> list_caches(const std::string& salt) const override {
    return caches_.list(salt);
  }
  [[nodiscard]] EngineStats stats() const override;
  [[nodiscard]] MetricsSnapshot metrics() const override;
  void drain(std::chrono::milliseconds timeout) override;
  [[nodiscard]] int64_t max_model_len() const override { return max_model_len_; }
  [[nodiscard]] int64_t max_waiting() const override { return config_.scheduler.max_waiting; }
  // LoRA adapters (engine_lora.cpp): a request's adapter is resolved at submit and held until
  // its last step (unloading only removes the name).
  Status load_lora(const std::string& name, const std::string& path) override {
    return loras_.load(name, path);
  }
  Status unload_lora(const std::string& name) override { return loras_.unload(name); }
  [[nodiscard]] std::vector<LoraInfo> list_loras() const override { return loras_.list(); }

  [[nodiscard]] const EngineConfig& config() const { return config_; }
  [[nodiscard]] int32_t num_kv_blocks() const { return num_blocks_; }
  // Bytes of one block payload (the storage block, every layer's K and V rows).
  [[nodiscard]] size_t kv_block_bytes() const { return storage_.layout().block_bytes(); }
  // The key prefix blocks are hashed under (model_identity.h): the same for every engine of the
  // model file, and computable from its metadata alone.
  [[nodiscard]] const kv::BlockHash& model_key() const { return model_key_; }

  // What the KV transfer services outside the engine use of it (kv_connector.h;
  // engine_kv_transfer.cpp). Lives as long as the engine.
  [[nodiscard]] KvConnector& kv_connector() const { return *connector_; }

 private:
  struct Submit {
    RequestKey key;
    GenerationRequest request;
    std::shared_ptr<OutputSink> sink;
    int64_t arrival_ns;
    int64_t cache_blocks;                            // retain_as: blocks reserved at submit
    std::shared_ptr<const model::LoraAdapter> lora;  // request.lora resolved; null = base
  };
  struct Abort {
    RequestKey key;
  };
  // A context cache left the table (release_cache): the engine thread unpins its blocks.
  struct ReleasePin {
    ContextCacheTable::Pin pin;
  };
  // The front end releases a finished request's session pin (release_kv_pin).
  struct ReleaseKvPin {
    RequestKey key;
  };
  // The KV connector (engine_kv_transfer.cpp); its read_block() has the engine thread copy a pool
  // block for another thread.
  class Connector;
  struct BlockRead;
  std::unique_ptr<KvConnector> make_connector();
  // The connector's read_block() and accept_block().
  Status read_kv_block(const kv::BlockHash& hash, std::span<std::byte> out,
                       std::chrono::milliseconds timeout);
  Status accept_kv_block(const kv::BlockHash& hash, std::span<const std::byte> payload);
  struct ReadBlock {
    kv::BlockHash hash;
    std::shared_ptr<BlockRead> read;
  };
  using Message = std::variant<Submit, Abort, ReleasePin, ReadBlock, ReleaseKvPin>;

  Engine(const model::Model& model, EngineConfig config, model::KvStorage storage,
         int32_t num_blocks, const kv::BlockHash& model_key, EngineDeps deps,
         std::unique_ptr<kv::KvTiers> tiers, EarlyExitHook early_exit,
         std::unique_ptr<draft::DraftModelRunner> draft_runner);
  // The tiers the config asks for (T1 host, T2 disk under the model's identity); the disk tier's
  // index is rebuilt from its directory. IoError when that directory cannot be used.
  // The draft head start() binds (EngineDeps::draft_head, else the configured or default file);
  // null with *missing saying why when there is none.
  static Result<std::shared_ptr<const draft::DraftHead>> open_draft_head(const model::Model& model,
                                                                         const EngineConfig& config,
                                                                         EngineDeps& deps,
                                                                         std::string* missing);
  // The draft model start() binds (EngineDeps::draft_model, else EngineConfig::draft_model_path;
  // null when neither is given) and its runner, whose KV pool is sized from the target's
  // (engine_draft_model.cpp).
  static Result<std::shared_ptr<const model::Model>> open_draft_model(const model::Model& model,
                                                                      const EngineConfig& config,
                                                                      EngineDeps& deps);
  static Result<std::unique_ptr<draft::DraftModelRunner>> make_draft_runner(
      const model::Model& draft, const EngineConfig& config, int32_t num_blocks);
  // The step's exits and proposals, handed to early_exit_ for their requests.
  void apply_exits(StepOutput& out);
  static Result<std::unique_ptr<kv::KvTiers>> open_tiers(const kv::BlockHash& model_key,
                                                         const EngineConfig& config,
                                                         size_t block_bytes, FileSystem* fs);

  void run();  // the engine thread
  // Applies queued messages; with `wait`, blocks until at least one arrives, stop is asked or a
  // context cache expires.
  void process_inbox(bool wait);
  // Pins a finished request's blocks as context cache a.request.retain_as (engine_context_caches).
  void pin_cache(RequestKey key, const EngineRequest& a);
  // Releases the blocks a context cache held (it has left caches_).
  void unpin(const ContextCacheTable::Pin& pin);
  // Unpins every context cache past its deadline.
  void expire_caches();
  // KV kept across tool calls (engine_kv_pins.cpp): pins a request that finished with kStop and
  // asked for it (GenerationRequest::keep_kv); releases the pins past their TTL; the earliest
  // deadline of a context cache or a pin, which an idle engine wakes for.
  void pin_kv(RequestKey key, const EngineRequest& a);
  void expire_kv_pins();
  // When nothing runs and requests wait with no tier read on its way, only pinned blocks could
  // let them in: the oldest pin gives way (one per call).
  void yield_kv_pin();
  void kv_pin_stats(EngineStats* s) const;  // the pins' fields of a stats snapshot
  [[nodiscard]] std::optional<int64_t> next_deadline_ns() const;
  void admit(Submit s);
  // Hands `r` to the scheduler, which borrows its RequestState (its key is set): the prompt, the
  // tokens it may generate, its prefix-cache key and PIC chunks.
  void enqueue(EngineRequest& r, int32_t max_tokens, const kv::BlockHash& extra_key,
               PicState pic = {});
  // Admits a request with PIC chunks: each from the chunk index, or compiled by an internal
  // request; the request is linked once every chunk is there (engine_pic.cpp).
  void admit_pic(EngineRequest& r);
  // Starts the internal request computing `tokens` alone for PIC parent `parent`; returns its key.
  RequestKey start_compile(RequestKey parent, std::span<const int32_t> tokens,
                           const std::string& salt, const kv::BlockHash& hash);
  // The prefix-cache key under which chunks of tenant `salt` are compiled.
  [[nodiscard]] kv::BlockHash chunk_extra_key(const std::string& salt) const;
  // Keeps a compiled chunk's table in the chunk index (one reference of its own).
  void index_chunk(const kv::BlockHash& hash, RequestKey key, int32_t len);
  void finish_compile(RequestKey key, EngineRequest& a, FinishReason reason);
  // Every child of a PIC parent is done: hands the parent (with its chunks, or without after a
  // failure) to the scheduler.
  void link_parent(EngineRequest& p);
  // Executes a plan's PIC row links, then releases their source tables.
  void run_links(StepPlan& plan);
  void cancel(RequestKey key);
  // request.lora's adapter (null for ""); NotFound when no adapter has that name.
  [[nodiscard]] Result<std::shared_ptr<const model::LoraAdapter>> resolve_lora(
      const GenerationRequest& request) const;
  // The prefix-cache key of a request's blocks: its model (or adapter) identity and cache salt.
  [[nodiscard]] kv::BlockHash extra_key(const EngineRequest& a) const;
  // The step cycle (engine.cpp): plans and launches a step (nullopt: nothing to run; the plan went
  // back through update()); launches a plan made ahead after resolving and extending it.
  std::optional<StepPlan> schedule_step();
  std::optional<StepPlan> launch_ahead(std::optional<StepPlan> next);
  void cancel_all();
  // After each step: the cache events and the stats.
  void end_step();
  // Removes finished requests, runs the plan's block work, builds the batch (step_batch.h) and
  // hands the step to the executor; false when nothing was launched.
  bool launch(StepPlan& plan);
  // A plan's block work before its forward pass: demotions copied out, copy-on-write copies,
  // promotions copied in, PIC row links.
  void apply_block_work(StepPlan& plan);
  // A request's seq in the step: its rows, sparse binding and sample.
  void add_to_step(const ScheduledSeq& s, EngineRequest& a, StepInput* in);
  void apply(const StepPlan& plan, StepOutput& out);
  // A sampled token of the step (at `t`): its event, or its request's end.
  void emit_token(StepOutput::Token& tok, int64_t t);
  // After a step: gives the pages its sparse requests released back to the pool.
  void release_sparse_pages(const StepPlan& plan);
  void finish(RequestKey key, EngineRequest& a, FinishReason reason, TokenEvent event);
  // A generated token's finish rule (stop strings, EOG, stop ids, length); nullopt: go on.
  // Sets event->stop_string when a stop string decides.
  std::optional<FinishReason> finish_reason(EngineRequest& a, int32_t token, TokenEvent* event);
  void release_if_done(RequestKey key);
  // Engine thread: answers a KvConnector::read_block() from the pool.
  void serve_block_read(const ReadBlock& r);
  void publish_stats();
  // Hands the KV manager's logged cache events to cache_events_ (when set and any were logged).
  void emit_cache_events();
  // Shows blocks published since the last call to published_blocks_ and keeps the logged cache
  // events for emit_cache_events() (engine_kv_transfer.cpp).
  void tap_published_blocks();
  void update_prefill_budget(const StepPlan& plan, double seconds);
  [[nodiscard]] bool idle() const;

  const model::Model& model_;
  EngineConfig config_;
  int64_t max_model_len_;
  int32_t num_blocks_;
  kv::BlockHash model_key_;
  Metrics metrics_;
  // An MoE model's routed tokens per expert (null for a dense model); outlives executor_.
  std::unique_ptr<model::ExpertTokenCounts> expert_counts_;
  const tokenizer::Tokenizer* tokenizer_;  // for stop strings and grammars; may be null
  // "draft-head" speculation's head (null: such requests are refused with draft_head_missing_).
  std::shared_ptr<const draft::DraftHead> draft_head_;
  std::string draft_head_missing_;
  // "draft-model" speculation's draft model (null: such requests are refused) and its runner,
  // which only the executor thread uses once the engine runs; both outlive executor_.
  std::shared_ptr<const model::Model> draft_model_;
  std::unique_ptr<draft::DraftModelRunner> draft_runner_;
  EarlyExitHook early_exit_;  // SpecEE early exit: predictors, checks, per-request schedules
  PipelineTail* pipeline_tail_ = nullptr;   // pipeline parallelism; null = every layer here
  std::vector<BlockCopy> pipeline_copies_;  // engine thread: copies not yet sent with a step
  LoraRegistry loras_{model_};              // the adapters requests may name
  // Structured outputs: parsed grammars and their mask caches, shared by requests with the same
  // grammar (engine thread; built on the first grammar request). The maskers inside are used by
  // the executor thread only, where every Sampler samples.
  std::unique_ptr<grammar::GrammarRegistry> grammars_;
  std::unique_ptr<FileSystem> fs_;          // the disk tier's file system
  std::unique_ptr<kv::KvTiers> tiers_;      // T1/T2 below the pool (possibly empty); thread-safe
  std::unique_ptr<TierTransfer> transfer_;  // reads tier blocks back (after tiers_: joins first)
  double prefill_seconds_per_token_ = 0;    // engine thread: moving average over steps
  std::atomic<double> prefill_seconds_per_token_published_{0};  // its copy for other threads
  StepCostModel step_costs_;  // engine thread: sizes the prefill budget

  // Engine-thread state.
  model::KvStorage storage_;
  kv::KvCacheManager kv_;
  // Every request from admission until no launched step uses it; a node's address is fixed, so
  // the scheduler borrows each one's RequestState (declared first: the scheduler goes first).
  std::unordered_map<RequestKey, EngineRequest> active_;
  Scheduler scheduler_;
  std::unique_ptr<StepExecutor> executor_;
  EngineStats counters_;    // cumulative counters kept on the engine thread
  kv::BlockHash pic_root_;  // root key of compiled PIC chunks (model identity + "pic")
  // EPIC's compiled chunks, at most a quarter of the pool (chunk_index.h).
  ChunkIndex chunk_index_{num_blocks_ / 4};
  ThreadPool link_pool_{1};  // the engine thread's RoPE for PIC links (no step is in flight then)
  std::unique_ptr<kernels::Ops> link_ops_;
  // EngineDeps::cache_events: the KV manager records cache events only when it is set.
  std::function<void(std::vector<kv::CacheEvent>)> cache_events_;
  PublishedBlockTap published_blocks_;                // EngineDeps::published_blocks
  std::vector<kv::CacheEvent> pending_cache_events_;  // tapped, not yet emitted

  // Shared with other threads.
  mutable Mutex mu_;
  std::condition_variable wake_;
  std::deque<Message> inbox_ KEEL_GUARDED_BY(mu_);
  EngineStats stats_ KEEL_GUARDED_BY(mu_);  // the last published snapshot
  std::atomic<int64_t> next_key_{1};
  std::atomic<int32_t> num_waiting_{0};  // submitted, not yet scheduled (admission control)
  std::atomic<int32_t> num_active_{0};   // submitted and not finished
  // Blocks reserved by context caches and requests that will become one (at most half the pool).
  std::atomic<int64_t> cache_blocks_reserved_{0};
  // The context caches: written by the engine thread (pin, expiry), read and removed by callers;
  // they expire on clock_.
  SteadyClock clock_;
  ContextCacheTable caches_{&clock_};
  std::atomic<bool> draining_{false};
  std::atomic<bool> stop_{false};
  std::unique_ptr<KvConnector> connector_;
  std::thread thread_;
};

}  // namespace keel::engine
