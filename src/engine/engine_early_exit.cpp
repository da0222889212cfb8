// Engine, SpecEE early exit (docs/speculative.md): which exit predictors the engine binds at
// start, each request's parameters and two-level layer schedule (exit_layer_schedule.h), what a
// step's executor gets of them (with a verification, its rows' candidates from the proposal its
// drafts came from), and what comes back (the exit layers, recorded in the schedule and the
// keel:early_exit_layers histogram; the feature the next step's candidates start from).
#include <algorithm>
#include <filesystem>

#include "core/log.h"
#include "engine/engine.h"

namespace keel::engine {
namespace {

// SpecEE's offline level keeps 8 of Llama2-7B's 32 layers: the same quarter of any depth.
int32_t offline_top_k(int32_t n_layer) { return std::max(1, n_layer / 4); }

}  // namespace

Result<std::shared_ptr<const draft::ExitPredictorFile>> Engine::open_exit_predictors(
    const model::Model& model, const EngineConfig& config, EngineDeps& deps, std::string* missing) {
  if (deps.exit_predictors != nullptr) {
    if (deps.exit_predictors->predictors.n_layer != model.hparams().n_layer) {
      return Status::invalid_argument("EngineDeps::exit_predictors are for another model");
    }
    return std::move(deps.exit_predictors);
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

void Engine::init_early_exit(EngineRequest& a) const {
  a.exit.params = a.request.early_exit.value_or(config_.early_exit);
  if (!a.exit.params.enabled || exit_predictors_ == nullptr || draft_head_ == nullptr) {
    a.exit.params.enabled = false;  // submit() refused such requests; a default cannot apply
    return;
  }
  const auto n_layer = static_cast<int32_t>(model_.hparams().n_layer);
  ExitScheduleConfig cfg;
  cfg.num_layers = n_layer;
  cfg.offline_top_k = offline_top_k(n_layer);
  std::vector<int32_t> offline;
  if (a.exit.params.layers.empty()) {
    Result<std::vector<int32_t>> ranked =
        rank_exit_layers(exit_predictors_->predictors.exit_counts, n_layer, cfg.offline_top_k);
    KEEL_CHECK(ranked.ok());  // the file's histogram was validated against the model
    offline = std::move(ranked).value();
  } else {  // fixed layers: no ring
    cfg.history = 0;
    for (int32_t l : a.exit.params.layers) {
      if (l < n_layer - 1 && std::find(offline.begin(), offline.end(), l) == offline.end()) {
        offline.push_back(l);
      }
    }
  }
  Result<ExitLayerSchedule> schedule = ExitLayerSchedule::create(cfg, std::move(offline));
  KEEL_CHECK(schedule.ok());
  a.exit.schedule.emplace(std::move(schedule).value());
}

StepInput::Sample::EarlyExit Engine::early_exit_sample(const EngineRequest& a,
                                                       const std::vector<int32_t>& drafts) const {
  StepInput::Sample::EarlyExit e;
  if (!a.exit.params.enabled || !a.exit.schedule.has_value()) return e;
  e.on = true;
  e.threshold = a.exit.params.threshold;
  e.active = a.exit.schedule->mask();
  e.feature = a.exit.feature;
  const size_t per_row = draft::kExitCandidates, rows = drafts.size() + 1;
  // The drafts are a prefix of the head's last proposal (the scheduler verifies only the
  // proposal made at the request's current length, maybe cut): its first rows' candidates.
  if (!drafts.empty() && drafts.size() <= a.exit.drafts.size() &&
      std::equal(drafts.begin(), drafts.end(), a.exit.drafts.begin()) &&
      a.exit.candidates.size() == (a.exit.drafts.size() + 1) * per_row) {
    e.candidates.assign(a.exit.candidates.begin(),
                        a.exit.candidates.begin() + static_cast<ptrdiff_t>(rows * per_row));
  }
  return e;
}

void Engine::apply_exits(StepOutput& out) {
  for (StepOutput::Exit& x : out.exits) {
    auto it = active_.find(x.key);
    if (it == active_.end() || !it->second.exit.schedule.has_value()) continue;
    EngineRequest& a = it->second;
    a.exit.feature = std::move(x.feature);
    for (int32_t layer : x.layers) {  // none: a prefill or an n-gram verification
      a.exit.schedule->record(layer);
      metrics_.early_exit_layers.observe(static_cast<double>(layer + 1));
    }
  }
  for (const StepOutput::Proposal& p : out.proposals) {
    auto it = active_.find(p.key);
    if (it == active_.end() || !it->second.exit.schedule.has_value()) continue;
    it->second.exit.drafts = p.drafts;
    it->second.exit.candidates = p.candidates;
  }
}

}  // namespace keel::engine
