// EngineHost: one model and the engine that runs it, brought up in the two phases a front end
// needs. open() reads only the GGUF's metadata — tokenizer, chat template, whether the weights are
// random — so a server can listen (and answer 503) at once; start() reads the weights, loads the
// model, starts the engine (the model's end-of-generation ids, the tokenizer for stop strings)
// and attaches it to client(), which answers Unavailable until then. `keel serve` hosts its
// engine through this; a task executor will host its engine the same way.
//
// Invariants: client() and ready() are valid from open() on; engine() is null until start()
// succeeded; start() runs at most once. Destroying the host stops the engine: whoever holds
// client() (a server) must be gone or drained first.
//
// Thread safety: open() and start() on the owner's thread; client(), ready() and the metadata
// accessors from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "engine/engine.h"
#include "engine/engine_config.h"
#include "engine/semi_pd_engine.h"
#include "host/compute.h"
#include "host/deferred_engine.h"
#include "host/expert_parallel.h"
#include "host/model_loading.h"
#include "host/pipeline_stage.h"
#include "model/model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/chat_template_choice.h"
#include "tokenizer/tokenizer.h"

namespace keel::host {

struct StartOptions {
  ComputeSetup compute;         // the kernel table and threads the engine runs with
  bool use_mmap = false;        // map the weights instead of reading them
  bool group_weights = true;    // model::ModelOptions::group_weights
  int64_t n_ctx = 0;            // model::ModelOptions::n_ctx (0 = the model's context)
  engine::EngineConfig engine;  // its isa, threads and eog_token_ids are set by start()
  // EngineDeps::cache_events: where the prefix cache's index changes go (a task executor's KV
  // event publisher); empty: none recorded.
  std::function<void(std::vector<kv::CacheEvent>)> cache_events;
  // EngineDeps::published_blocks: a streamed KV handoff's tap on published blocks; empty: none.
  engine::PublishedBlockTap published_blocks;
  // --pp 2: the engine is stage 0 of a pipeline whose stage 1 is started (or reached) here.
  PipelineOptions pipeline;
  // --ep N: the engine leads an expert-parallel instance of N processes (expert_parallel.h).
  ExpertParallelOptions expert_parallel;
};

class EngineHost {
 public:
  // The metadata of the GGUF at `path` (no tensor bytes are read). A non-empty `chat_template`
  // (--chat-template / --chat-template-file) replaces the GGUF's template; its errors
  // (tokenizer/chat_template_choice.h) fail the open.
  static Result<std::unique_ptr<EngineHost>> open(
      const std::string& path, const tokenizer::ChatTemplateChoice& chat_template = {});

  // Reads the weights (reporting bytes to `progress`), loads the model, starts the engine and
  // attaches it to client(); then ready() turns true.
  Status start(StartOptions options, const ReadProgress& progress = {});

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  [[nodiscard]] const std::shared_ptr<const tokenizer::ChatTemplate>& chat_template() const {
    return chat_template_;
  }
  [[nodiscard]] bool random_weights() const { return random_weights_; }
  // The engine as a client: Unavailable until start() succeeded.
  [[nodiscard]] engine::EngineClient* client() { return &client_; }
  // False until start() succeeded (ServerDeps::ready).
  [[nodiscard]] const std::atomic<bool>* ready() const { return &ready_; }
  // The colocated engine; null until start() succeeded, and in semi-PD mode.
  [[nodiscard]] engine::Engine* engine() { return engine_.get(); }
  // The semi-PD engine (StartOptions::engine.semi_pd set); null otherwise.
  [[nodiscard]] engine::SemiPdEngine* semi_pd() { return semi_pd_.get(); }
  // Seconds start() spent getting the weights' bytes (reading the file, or mapping it), the rest
  // being the model's and the engine's build: the pre-load / load split of a scale-out.
  [[nodiscard]] double weights_seconds() const { return weights_seconds_; }
  // The started stage-1 process's pid (--pp 2 without --pp-stage1); 0 otherwise.
  [[nodiscard]] pid_t stage1_pid() const { return stage_process_ ? stage_process_->pid() : 0; }

 private:
  EngineHost(std::string path, tokenizer::Tokenizer tok, tokenizer::ChatTemplate tmpl,
             bool random_weights);

  std::string path_;
  std::unique_ptr<const tokenizer::Tokenizer> tokenizer_;  // stable address for the engine
  std::shared_ptr<const tokenizer::ChatTemplate> chat_template_;
  bool random_weights_ = false;
  double weights_seconds_ = 0.0;
  DeferredEngine client_;
  std::atomic<bool> ready_{false};
  std::unique_ptr<model::Model> model_;
  // Pipeline stage 1 (--pp 2): declared before engine_, so the engine stops before its tail goes.
  std::unique_ptr<StageProcess> stage_process_;
  std::unique_ptr<pipeline::RemoteStage> stage_;
  // Expert members (--ep): declared before engine_, so the engine stops before they go.
  std::unique_ptr<ExpertMembers> expert_members_;
  std::unique_ptr<engine::Engine> engine_;         // after model_: stopped before the model goes
  std::unique_ptr<engine::SemiPdEngine> semi_pd_;  // idem; set instead of engine_ in semi-PD mode
};

}  // namespace keel::host
