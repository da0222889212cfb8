// EarlyExitHook (early_exit_hook.h).
#include "engine/early_exit_hook.h"

#include <algorithm>
#include <filesystem>

#include "core/log.h"

namespace keel::engine {
namespace {

// SpecEE's offline level keeps 8 of Llama2-7B's 32 layers: the same quarter of any depth.
int32_t offline_top_k(int32_t n_layer) { return std::max(1, n_layer / 4); }

// The predictors bind() takes; null with *missing saying why when there are none.
Result<std::shared_ptr<const draft::ExitPredictorFile>> open_predictors(
    const model::Model& model, const EngineConfig& config,
    std::shared_ptr<const draft::ExitPredictorFile> given, std::string* missing) {
  if (given != nullptr) {
    if (given->predictors.n_layer != model.hparams().n_layer) {
      return Status::invalid_argument("EngineDeps::exit_predictors are for another model");
    }
    return given;
  }
  if (!config.exit_predictors_path.empty()) {
    KEEL_ASSIGN_OR_RETURN(draft::ExitPredictorFile f,
                          draft::load_exit_predictors(config.exit_predictors_path, model));
    return std::make_shared<const draft::ExitPredictorFile>(std::move(f));
  }
  const std::string path = draft::default_exit_path(model.file().path());
  std::error_code ec;
  if (model.file().path().empty() || !std::filesystem::exists(path, ec)) {
    *missing = "no exit predictors given (--exit-predictors) and none at " + path +
               "; train them with keel train-exit";
    return std::shared_ptr<const draft::ExitPredictorFile>();
  }
  Result<draft::ExitPredictorFile> f = draft::load_exit_predictors(path, model);
  if (!f.ok()) {
    KEEL_LOG_WARN("exit predictors not loaded: {}", f.error().to_string());
    *missing = f.error().message();
    return std::shared_ptr<const draft::ExitPredictorFile>();
  }
  KEEL_LOG_INFO("exit predictors {} loaded", path);
  return std::make_shared<const draft::ExitPredictorFile>(std::move(f).value());
}

}  // namespace

Result<EarlyExitHook> EarlyExitHook::bind(const model::Model& model, const EngineConfig& config,
                                          std::shared_ptr<const draft::ExitPredictorFile> given,
                                          const draft::DraftHead* head,
                                          const std::string& head_missing) {
  EarlyExitHook h;
  KEEL_ASSIGN_OR_RETURN(h.file_, open_predictors(model, config, std::move(given), &h.missing_));
  if (h.missing_.empty() && head == nullptr) {  // the candidates come from it
    h.missing_ = "early exit needs the draft head: " + head_missing;
  }
  if (config.early_exit.enabled && !h.missing_.empty()) {
    return Status::invalid_argument("--early-exit: " + h.missing_);
  }
  h.head_ = head;
  h.defaults_ = config.early_exit;
  h.n_layer_ = static_cast<int32_t>(model.hparams().n_layer);
  return h;
}

Status EarlyExitHook::check(const GenerationRequest& request) const {
  if (request.early_exit.has_value()) KEEL_TRY(request.early_exit->validate());
  if (request.early_exit.value_or(defaults_).enabled && !missing_.empty()) {
    return Status::invalid_argument("early_exit: " + missing_);
  }
  return Status::ok_status();
}

void EarlyExitHook::admit(const GenerationRequest& request, EarlyExitPart* part) const {
  part->params = request.early_exit.value_or(defaults_);
  if (!part->params.enabled || file_ == nullptr || head_ == nullptr) {
    part->params.enabled = false;  // check() refused such requests; a default cannot apply
    return;
  }
  ExitScheduleConfig cfg;
  cfg.num_layers = n_layer_;
  cfg.offline_top_k = offline_top_k(n_layer_);
  std::vector<int32_t> offline;
  if (part->params.layers.empty()) {
    Result<std::vector<int32_t>> ranked =
        rank_exit_layers(file_->predictors.exit_counts, n_layer_, cfg.offline_top_k);
    KEEL_CHECK(ranked.ok());  // the file's histogram was validated against the model
    offline = std::move(ranked).value();
  } else {  // fixed layers: no ring
    cfg.history = 0;
    for (int32_t l : part->params.layers) {
      if (l < n_layer_ - 1 && std::find(offline.begin(), offline.end(), l) == offline.end()) {
        offline.push_back(l);
      }
    }
  }
  Result<ExitLayerSchedule> schedule = ExitLayerSchedule::create(cfg, std::move(offline));
  KEEL_CHECK(schedule.ok());
  part->schedule.emplace(std::move(schedule).value());
}

StepInput::Sample::EarlyExit EarlyExitHook::sample(const EarlyExitPart& part,
                                                   const std::vector<int32_t>& drafts) const {
  StepInput::Sample::EarlyExit e;
  if (!part.params.enabled || !part.schedule.has_value()) return e;
  e.on = true;
  e.threshold = part.params.threshold;
  e.active = part.schedule->mask();
  e.feature = part.feature;
  const size_t per_row = draft::kExitCandidates, rows = drafts.size() + 1;
  // The drafts are a prefix of the head's last proposal (the scheduler verifies only the
  // proposal made at the request's current length, maybe cut): its first rows' candidates.
  if (!drafts.empty() && drafts.size() <= part.drafts.size() &&
      std::equal(drafts.begin(), drafts.end(), part.drafts.begin()) &&
      part.candidates.size() == (part.drafts.size() + 1) * per_row) {
    e.candidates.assign(part.candidates.begin(),
                        part.candidates.begin() + static_cast<ptrdiff_t>(rows * per_row));
  }
  return e;
}

void EarlyExitHook::on_exit(EarlyExitPart* part, StepOutput::Exit& exit, Histogram* layers) {
  if (!part->schedule.has_value()) return;
  part->feature = std::move(exit.feature);
  for (int32_t layer : exit.layers) {  // none: a prefill or an n-gram verification
    part->schedule->record(layer);
    layers->observe(static_cast<double>(layer + 1));
  }
}

void EarlyExitHook::on_proposal(EarlyExitPart* part, const StepOutput::Proposal& proposal) {
  if (!part->schedule.has_value()) return;
  part->drafts = proposal.drafts;
  part->candidates = proposal.candidates;
}

}  // namespace keel::engine
