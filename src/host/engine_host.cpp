// EngineHost (see engine_host.h).
#include "host/engine_host.h"

#include <chrono>
#include <utility>

#include "core/file_system.h"
#include "core/log.h"
#include "engine/pipeline_checks.h"
#include "gguf/reader.h"

namespace keel::host {

EngineHost::EngineHost(std::string path, tokenizer::Tokenizer tok, tokenizer::ChatTemplate tmpl,
                       bool random_weights)
    : path_(std::move(path)),
      tokenizer_(std::make_unique<const tokenizer::Tokenizer>(std::move(tok))),
      chat_template_(std::make_shared<const tokenizer::ChatTemplate>(std::move(tmpl))),
      random_weights_(random_weights) {}

Result<std::unique_ptr<EngineHost>> EngineHost::open(
    const std::string& path, const tokenizer::ChatTemplateChoice& chat_template) {
  PosixFileSystem fs;
  KEEL_ASSIGN_OR_RETURN(std::optional<tokenizer::ChosenChatTemplate> chosen,
                        tokenizer::load_chat_template(chat_template, fs));
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile meta,
                        gguf::GgufFile::open(path, {.mode = gguf::DataMode::kNone}));
  KEEL_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok, tokenizer::Tokenizer::from_gguf(meta));
  if (chosen) KEEL_LOG_INFO("chat template: {} (instead of the model's)", chosen->description);
  tokenizer::ChatTemplate tmpl =
      chosen ? std::move(chosen->tmpl) : tokenizer::ChatTemplate::from_gguf(meta);
  return std::unique_ptr<EngineHost>(
      new EngineHost(path, std::move(tok), std::move(tmpl), has_random_weights(meta)));
}

Status EngineHost::start(StartOptions options, const ReadProgress& progress) {
  if (engine_ != nullptr) return Status::internal("EngineHost::start called twice");
  model::ModelOptions mopts;
  mopts.n_ctx = options.n_ctx;
  mopts.group_weights = options.group_weights;
  const ExpertParallelOptions& ep = options.expert_parallel;
  std::optional<model::ExpertPlacement> placement;  // --ep-replicas: hot experts copied
  if (ep.enabled()) {
    KEEL_TRY(ep.validate());
    if (options.pipeline.enabled() || options.engine.semi_pd.has_value()) {
      return Status::invalid_argument("--ep goes with neither --pp nor --semi-pd");
    }
    KEEL_ASSIGN_OR_RETURN(placement, plan_expert_placement(ep));
    mopts.expert_shard = placement ? placement->shard(0) : ep.leader_shard();
  }
  const auto t0 = std::chrono::steady_clock::now();
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile file,
                        read_weights(path_, options.use_mmap, progress, mopts.expert_shard));
  weights_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  KEEL_ASSIGN_OR_RETURN(model_, model::Model::load(std::move(file), mopts));
  engine::EngineConfig config = std::move(options.engine);
  config.isa = options.compute.isa;
  config.threads = options.compute.threads;
  config.eog_token_ids.assign(tokenizer_->eog_ids().begin(), tokenizer_->eog_ids().end());
  if (options.pipeline.enabled()) {
    KEEL_TRY(engine::check_pipeline_config(config));  // before a stage process is started
    options.pipeline.stage1_mmap = options.pipeline.stage1_mmap || options.use_mmap;
    KEEL_ASSIGN_OR_RETURN(stage_,
                          connect_stage(options.pipeline, path_, *model_, config, &stage_process_));
  }
  if (ep.enabled()) {
    KEEL_ASSIGN_OR_RETURN(expert_members_, ExpertMembers::start(ep, path_, *model_, config.threads,
                                                                config.scheduler.max_batched_tokens,
                                                                std::move(placement)));
  }
  if (config.semi_pd.has_value()) {
    KEEL_ASSIGN_OR_RETURN(semi_pd_,
                          engine::SemiPdEngine::start(*model_, std::move(config),
                                                      engine::SemiPdDeps{tokenizer_.get()}));
    client_.attach(semi_pd_.get());
    ready_.store(true, std::memory_order_release);
    return {};
  }
  KEEL_ASSIGN_OR_RETURN(
      engine_,
      engine::Engine::start(
          *model_, std::move(config),
          engine::EngineDeps{.tokenizer = tokenizer_.get(),
                             .cache_events = std::move(options.cache_events),
                             .published_blocks = std::move(options.published_blocks),
                             .pipeline_tail = stage_.get(),
                             .expert_parallel = expert_members_ ? expert_members_->expert_parallel()
                                                                : model::ExpertParallel{}}));
  client_.attach(engine_.get());
  ready_.store(true, std::memory_order_release);
  return {};
}

}  // namespace keel::host
