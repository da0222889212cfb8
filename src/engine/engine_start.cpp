// Engine start-up: the KV pool sized from the config, the draft head, the draft model and the
// early-exit predictors bound, the KV tiers opened and measured, then the engine and executor
// threads started; and the stop that joins them. See engine.h.
#include <algorithm>
#include <string>
#include <utility>

#include "core/log.h"
#include "engine/engine.h"
#include "engine/model_identity.h"
#include "engine/pipeline_checks.h"
#include "grammar/grammar_registry.h"
#include "kv/disk_tier.h"
#include "kv/host_tier.h"

namespace keel::engine {

Result<std::unique_ptr<kv::KvTiers>> Engine::open_tiers(const kv::BlockHash& model_key,
                                                        const EngineConfig& config,
                                                        size_t block_bytes, FileSystem* fs) {
  std::unique_ptr<kv::TierStore> host, disk;
  if (config.kv_host_bytes > 0) {
    host = std::make_unique<kv::HostTier>(config.kv_host_bytes, block_bytes);
  }
  if (!config.kv_disk_dir.empty()) {
    kv::DiskTierConfig dc;
    dc.dir = config.kv_disk_dir;
    dc.capacity_bytes = config.kv_disk_bytes;
    dc.identity = kv_tier_identity(model_key, config.kv_dtype, config.block_size);
    dc.payload_bytes = block_bytes;
    KEEL_ASSIGN_OR_RETURN(std::unique_ptr<kv::DiskTier> d, kv::DiskTier::open(fs, dc));
    disk = std::move(d);
  }
  return std::make_unique<kv::KvTiers>(std::move(host), std::move(disk));
}

Result<std::unique_ptr<Engine>> Engine::start(const model::Model& model, EngineConfig config,
                                              std::unique_ptr<FileSystem> fs) {
  return start(model, std::move(config), EngineDeps{nullptr, std::move(fs)});
}

Result<std::unique_ptr<Engine>> Engine::start(const model::Model& model, EngineConfig config,
                                              EngineDeps deps) {
  if (deps.fs == nullptr) deps.fs = std::make_unique<PosixFileSystem>();
  KEEL_TRY(config.validate());
  const int64_t max_len = config.scheduler.max_model_len > 0
                              ? std::min<int64_t>(config.scheduler.max_model_len, model.n_ctx())
                              : model.n_ctx();
  config.scheduler.max_model_len = static_cast<int32_t>(max_len);
  model::KvLayout layout =
      model::KvLayout::for_model(model.hparams(), config.block_size, config.kv_dtype);
  if (deps.expert_parallel.remote != nullptr &&
      (!model.hparams().is_moe() || deps.pipeline_tail != nullptr)) {
    return Status::invalid_argument(model.hparams().is_moe()
                                        ? "expert parallelism with pipeline stages is not supported"
                                        : "expert parallelism needs a mixture-of-experts model");
  }
  if (deps.pipeline_tail != nullptr) {
    KEEL_TRY(check_pipeline_config(config));
    if (deps.published_blocks) return Status::invalid_argument("a streamed KV hand-off with --pp");
    const int64_t split = deps.pipeline_tail->first_layer();
    if (split < 1 || split >= model.hparams().n_layer) {
      return Status::invalid_argument("pipeline split at layer " + std::to_string(split) +
                                      " is outside [1, " + std::to_string(model.hparams().n_layer) +
                                      ")");
    }
    layout.n_layer = split;  // stage 0's layers only
  }
  // The pool's size in blocks is that of the full model's layout, so every stage holds as many
  // blocks (the later stages use stage 0's block ids).
  KEEL_ASSIGN_OR_RETURN(const int32_t num_blocks,
                        kv_pool_blocks(config, max_len,
                                       model::KvLayout::for_model(
                                           model.hparams(), config.block_size, config.kv_dtype)));
  KEEL_ASSIGN_OR_RETURN(model::KvStorage storage, model::KvStorage::create(layout, num_blocks));
  KEEL_ASSIGN_OR_RETURN(const kv::BlockHash model_key, model_identity(model.file()));
  std::string head_missing;
  KEEL_ASSIGN_OR_RETURN(deps.draft_head, open_draft_head(model, config, deps, &head_missing));
  if (deps.draft_head == nullptr && config.speculative.method == SpecMethod::kDraftHead) {
    return Status::invalid_argument("--speculative draft-head: " + head_missing);
  }
  KEEL_ASSIGN_OR_RETURN(deps.draft_model, open_draft_model(model, config, deps));
  std::unique_ptr<draft::DraftModelRunner> draft_runner;
  if (deps.draft_model != nullptr) {
    KEEL_ASSIGN_OR_RETURN(draft_runner, make_draft_runner(*deps.draft_model, config, num_blocks));
  } else if (config.speculative.method == SpecMethod::kDraftModel) {
    return Status::invalid_argument(
        "--speculative draft-model: no draft model given (--draft-model FILE)");
  }
  KEEL_ASSIGN_OR_RETURN(EarlyExitHook early_exit,
                        EarlyExitHook::bind(model, config, std::move(deps.exit_predictors),
                                            deps.draft_head.get(), head_missing));
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<kv::KvTiers> tiers,
                        open_tiers(model_key, config, layout.block_bytes(), deps.fs.get()));
  if (!tiers->empty()) {
    if (Status st = tiers->measure(); !st.ok()) {
      KEEL_LOG_WARN("KV tier read cost not measured ({}): tier hits are always fetched",
                    st.to_string());
    }
    KEEL_LOG_INFO("KV tiers: host {} (read {:.1f} us/block), disk {} (read {:.1f} us/block)",
                  config.kv_host_bytes > 0 ? "on" : "off",
                  tiers->host_cost().read_seconds(layout.block_bytes()) * 1e6,
                  config.kv_disk_dir.empty() ? "off" : config.kv_disk_dir,
                  tiers->disk_cost().read_seconds(layout.block_bytes()) * 1e6);
  }
  std::unique_ptr<Engine> e(new Engine(model, std::move(config), std::move(storage), num_blocks,
                                       model_key, std::move(deps), std::move(tiers),
                                       std::move(early_exit), std::move(draft_runner)));
  e->draft_head_missing_ = std::move(head_missing);  // read by submit() only, after this returns
  return e;
}

Engine::Engine(const model::Model& model, EngineConfig config, model::KvStorage storage,
               int32_t num_blocks, const kv::BlockHash& model_key, EngineDeps deps,
               std::unique_ptr<kv::KvTiers> tiers, EarlyExitHook early_exit,
               std::unique_ptr<draft::DraftModelRunner> draft_runner)
    : model_(model),
      config_(std::move(config)),
      max_model_len_(config_.scheduler.max_model_len),
      num_blocks_(num_blocks),
      model_key_(model_key),
      tokenizer_(deps.tokenizer),
      draft_head_(std::move(deps.draft_head)),
      draft_model_(std::move(deps.draft_model)),
      draft_runner_(std::move(draft_runner)),
      early_exit_(std::move(early_exit)),
      pipeline_tail_(deps.pipeline_tail),
      fs_(std::move(deps.fs)),
      tiers_(std::move(tiers)),
      storage_(std::move(storage)),
      kv_(kv::KvCacheConfig{num_blocks, config_.block_size, config_.enable_prefix_cache,
                            !tiers_->empty(), kv_pin_limits(config_, num_blocks)}),
      scheduler_(config_.scheduler, &kv_) {
  if (!tiers_->empty()) {
    transfer_ = std::make_unique<TierTransfer>(tiers_.get(), storage_.layout().block_bytes());
  }
  scheduler_.set_tiers(tiers_.get(), storage_.layout().block_bytes(), transfer_.get());
  cache_events_ = std::move(deps.cache_events);
  published_blocks_ = std::move(deps.published_blocks);
  if (cache_events_ || published_blocks_) kv_.set_record_cache_events(true);
  if (cache_events_ && tiers_ != nullptr) tiers_->set_record_events(true);
  const model::HParams& hp = model_.hparams();
  if (hp.is_moe()) {
    expert_counts_ = std::make_unique<model::ExpertTokenCounts>(hp.n_layer, hp.moe.n_expert);
  }
  executor_ = std::make_unique<StepExecutor>(
      model_, &storage_, config_.isa, config_.threads, config_.scheduler.max_batched_tokens,
      sparse_select_layer(config_.sparse_tuning, hp.n_layer), draft_head_.get(),
      early_exit_.predictors(), pipeline_tail_, expert_counts_.get(), deps.expert_parallel,
      draft_runner_.get());
  link_ops_ = std::make_unique<kernels::Ops>(config_.isa, &link_pool_);
  pic_root_ = pic_chunk_root(model_key_);
  counters_.kv_capacity_tokens = int64_t{num_blocks} * config_.block_size;
  publish_stats();
  connector_ = make_connector();
  thread_ = std::thread([this] { run(); });
}

Engine::~Engine() {
  {
    MutexLock lock(mu_);
    stop_.store(true);
  }
  wake_.notify_all();
  thread_.join();
}

}  // namespace keel::engine
