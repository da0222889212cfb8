// Engine, draft-head speculation (docs/speculative.md): which head the engine binds at start, and
// the check that refuses "draft-head" requests when there is none. The head itself runs on the
// executor thread (StepExecutor::sample_all); its proposals reach the scheduler in apply().
#include <filesystem>

#include "core/log.h"
#include "draft/draft_head_file.h"
#include "engine/engine.h"

namespace keel::engine {

Result<std::shared_ptr<const draft::DraftHead>> Engine::open_draft_head(const model::Model& model,
                                                                        const EngineConfig& config,
                                                                        EngineDeps& deps,
                                                                        std::string* missing) {
  if (deps.draft_head != nullptr) {
    if (&deps.draft_head->target() != &model) {
      return Status::invalid_argument("EngineDeps::draft_head is bound to another model");
    }
    return std::move(deps.draft_head);
  }
  if (!config.draft_head_path.empty()) {
    KEEL_ASSIGN_OR_RETURN(std::unique_ptr<draft::DraftHead> head,
                          draft::load_draft_head(config.draft_head_path, model));
    return std::shared_ptr<const draft::DraftHead>(std::move(head));
  }
  const std::string path = draft::default_draft_head_path(model.file().path());
  std::error_code ec;
  if (model.file().path().empty() || !std::filesystem::exists(path, ec)) {
    *missing = "no draft head given (--draft-head) and none at " + path +
               "; train one with keel train-draft";
    return std::shared_ptr<const draft::DraftHead>();
  }
  Result<std::unique_ptr<draft::DraftHead>> head = draft::load_draft_head(path, model);
  if (!head.ok()) {
    KEEL_LOG_WARN("draft head not loaded: {}", head.error().to_string());
    *missing = head.error().message();
    return std::shared_ptr<const draft::DraftHead>();
  }
  KEEL_LOG_INFO("draft head {} loaded", path);
  return std::shared_ptr<const draft::DraftHead>(std::move(head).value());
}

}  // namespace keel::engine
