// Engine, draft-model speculation (docs/speculative.md): the draft model the engine binds at start
// (checked against the target's vocabulary) and its runner's KV pool. The runner drafts on the
// executor thread (StepExecutor::draft_with_model); its proposals reach the scheduler in apply().
#include <algorithm>

#include "core/log.h"
#include "draft/draft_model.h"
#include "engine/engine.h"

namespace keel::engine {

Result<std::shared_ptr<const model::Model>> Engine::open_draft_model(const model::Model& model,
                                                                     const EngineConfig& config,
                                                                     EngineDeps& deps) {
  if (deps.draft_model != nullptr) {
    KEEL_TRY(draft::check_same_vocabulary(model, *deps.draft_model,
                                          deps.draft_model->file().path().empty()
                                              ? std::string("(given)")
                                              : deps.draft_model->file().path()));
    return std::move(deps.draft_model);
  }
  if (config.draft_model_path.empty()) return std::shared_ptr<const model::Model>();
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<model::Model> m,
                        draft::open_draft_model(config.draft_model_path, model));
  return std::shared_ptr<const model::Model>(std::move(m));
}

Result<std::unique_ptr<draft::DraftModelRunner>> Engine::make_draft_runner(
    const model::Model& draft, const EngineConfig& config, int32_t num_blocks) {
  // As many positions as the target's pool (every sequence the target holds fits), plus one
  // block per sequence for the drafts past its last token (k ≤ 16 positions).
  draft::DraftModelConfig c;
  c.block_size = config.block_size;
  const int32_t per_seq = (kMaxSpecK + config.block_size - 1) / config.block_size;
  c.num_blocks = num_blocks + per_seq * config.scheduler.max_num_seqs;
  c.kv_dtype = config.kv_dtype;
  c.max_batch_tokens = std::max<int64_t>(config.scheduler.max_batched_tokens, 1);
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<draft::DraftModelRunner> r,
                        draft::DraftModelRunner::create(draft, c));
  const model::HParams& hp = draft.hparams();
  KEEL_LOG_INFO("draft model {}: {} layers, n_embd {}; its KV pool {} blocks ({} MiB)",
                draft.file().path(), hp.n_layer, hp.n_embd, c.num_blocks, r->kv_bytes() >> 20);
  return r;
}

}  // namespace keel::engine
