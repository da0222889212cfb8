// FineTuningJob, its events and checkpoints as JSON; status rules; model names
// (fine_tuning_job.h).
#include "server/fine_tuning_job.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>

namespace keel::server {
namespace {

using Json = nlohmann::json;

constexpr std::array<std::pair<FtStatus, std::string_view>, 7> kStatusNames = {{
    {FtStatus::kValidatingFiles, "validating_files"},
    {FtStatus::kQueued, "queued"},
    {FtStatus::kRunning, "running"},
    {FtStatus::kPaused, "paused"},
    {FtStatus::kSucceeded, "succeeded"},
    {FtStatus::kFailed, "failed"},
    {FtStatus::kCancelled, "cancelled"},
}};

template <typename T>
Json nullable(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

template <typename T>
std::optional<T> ft_nullable_field(const Json& j, const char* name) {
  const Json& v = j.at(name);
  if (v.is_null()) return std::nullopt;
  return v.get<T>();
}

template <typename T>
Json or_auto(const std::optional<T>& v) {
  return v ? Json(*v) : Json("auto");
}

template <typename T>
std::optional<T> auto_field(const Json& j, const char* name) {
  const Json& v = j.at(name);
  if (v.is_string() && v.get<std::string>() == "auto") return std::nullopt;
  return v.get<T>();
}

Json hyperparameters_json(const FtHyperparameters& h) {
  return {{"n_epochs", or_auto(h.n_epochs)},
          {"batch_size", or_auto(h.batch_size)},
          {"learning_rate_multiplier", or_auto(h.learning_rate_multiplier)}};
}

Json checkpoint_state_json(const FtCheckpoint& c) {
  return {{"id", c.id},
          {"created_at", c.created_at},
          {"step", c.step},
          {"model", c.model},
          {"adapter_path", c.adapter_path},
          {"train_loss", c.train_loss},
          {"train_accuracy", c.train_accuracy},
          {"valid_loss", nullable(c.valid_loss)},
          {"valid_accuracy", nullable(c.valid_accuracy)}};
}

FtCheckpoint checkpoint_from_state_json(const Json& j) {
  FtCheckpoint c;
  c.id = j.at("id").get<std::string>();
  c.created_at = j.at("created_at").get<int64_t>();
  c.step = j.at("step").get<int64_t>();
  c.model = j.at("model").get<std::string>();
  c.adapter_path = j.at("adapter_path").get<std::string>();
  c.train_loss = j.at("train_loss").get<double>();
  c.train_accuracy = j.at("train_accuracy").get<double>();
  c.valid_loss = ft_nullable_field<double>(j, "valid_loss");
  c.valid_accuracy = ft_nullable_field<double>(j, "valid_accuracy");
  return c;
}

}  // namespace

std::string_view ft_status_name(FtStatus status) {
  for (const auto& [s, name] : kStatusNames) {
    if (s == status) return name;
  }
  return "unknown";
}

std::optional<FtStatus> parse_ft_status(std::string_view name) {
  for (const auto& [s, n] : kStatusNames) {
    if (n == name) return s;
  }
  return std::nullopt;
}

bool is_terminal(FtStatus status) {
  return status == FtStatus::kSucceeded || status == FtStatus::kFailed ||
         status == FtStatus::kCancelled;
}

std::string_view ft_action_name(FtAction action) {
  switch (action) {
    case FtAction::kCancel:
      return "cancel";
    case FtAction::kPause:
      return "pause";
    case FtAction::kResume:
      return "resume";
  }
  return "?";
}

std::optional<FtStatus> status_after(FtStatus status, FtAction action) {
  switch (action) {
    case FtAction::kCancel:
      if (is_terminal(status)) return std::nullopt;
      return FtStatus::kCancelled;
    case FtAction::kPause:
      if (status != FtStatus::kQueued && status != FtStatus::kRunning) return std::nullopt;
      return FtStatus::kPaused;
    case FtAction::kResume:
      if (status != FtStatus::kPaused) return std::nullopt;
      return FtStatus::kQueued;
  }
  return std::nullopt;
}

FtHyperparameters resolve_hyperparameters(const FtHyperparameters& h, int64_t num_examples) {
  constexpr int64_t kMinTargetExamples = 100, kMaxTargetExamples = 25'000;
  constexpr int32_t kTargetEpochs = 3, kMaxDefaultEpochs = 25;
  const int64_t n = std::max<int64_t>(num_examples, 1);
  FtHyperparameters r = h;
  if (!r.n_epochs) {
    int64_t epochs = kTargetEpochs;
    if (n * kTargetEpochs < kMinTargetExamples) {
      epochs = std::min<int64_t>(kMaxDefaultEpochs, (kMinTargetExamples + n - 1) / n);
    } else if (n * kTargetEpochs > kMaxTargetExamples) {
      epochs = std::max<int64_t>(1, kMaxTargetExamples / n);
    }
    r.n_epochs = static_cast<int32_t>(epochs);
  }
  if (!r.batch_size) {
    r.batch_size = static_cast<int32_t>(std::clamp<int64_t>((n * 2 + 500) / 1000, 1, 256));
  }
  if (!r.learning_rate_multiplier) r.learning_rate_multiplier = 1.0;
  return r;
}

Json FtCheckpoint::to_json(std::string_view job_id) const {
  Json metrics = {
      {"step", step}, {"train_loss", train_loss}, {"train_mean_token_accuracy", train_accuracy}};
  if (valid_loss) {
    metrics["valid_loss"] = *valid_loss;
    metrics["full_valid_loss"] = *valid_loss;  // the whole validation file is measured
  }
  if (valid_accuracy) {
    metrics["valid_mean_token_accuracy"] = *valid_accuracy;
    metrics["full_valid_mean_token_accuracy"] = *valid_accuracy;
  }
  return {{"object", "fine_tuning.job.checkpoint"},
          {"id", id},
          {"created_at", created_at},
          {"fine_tuned_model_checkpoint", model},
          {"fine_tuning_job_id", job_id},
          {"metrics", std::move(metrics)},
          {"step_number", step}};
}

Json FtEvent::to_json() const {
  return {{"object", "fine_tuning.job.event"},
          {"id", id},
          {"created_at", created_at},
          {"level", level},
          {"message", message},
          {"data", data},
          {"type", metrics ? "metrics" : "message"}};
}

std::optional<int64_t> FtEvent::step() const {
  if (!metrics || !data.is_object()) return std::nullopt;
  auto it = data.find("step");
  if (it == data.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

Result<FtEvent> ft_event_from_json(const Json& j) {
  FtEvent e;
  try {
    e.id = j.at("id").get<std::string>();
    e.created_at = j.at("created_at").get<int64_t>();
    e.level = j.at("level").get<std::string>();
    e.message = j.at("message").get<std::string>();
    e.data = j.at("data");
    e.metrics = j.at("type").get<std::string>() == "metrics";
  } catch (const Json::exception& ex) {
    return Status::corrupt(fmt::format("fine-tuning event: {}", ex.what()));
  }
  return e;
}

Json FineTuningJob::to_json() const {
  Json err = nullptr;
  if (error) {
    err = {{"code", error->code}, {"message", error->message}, {"param", nullable(error->param)}};
  }
  const Json hyper = hyperparameters_json(hyperparameters);
  return {{"object", "fine_tuning.job"},
          {"id", id},
          {"model", model},
          {"created_at", created_at},
          {"finished_at", nullable(finished_at)},
          {"fine_tuned_model", nullable(fine_tuned_model)},
          {"organization_id", "keel"},
          {"result_files", result_files},
          {"status", ft_status_name(status)},
          {"validation_file", nullable(validation_file)},
          {"training_file", training_file},
          {"hyperparameters", hyper},
          {"trained_tokens", nullable(trained_tokens)},
          {"error", err},
          {"seed", seed},
          {"suffix", nullable(suffix)},
          {"estimated_finish", nullable(estimated_finish)},
          {"integrations", Json::array()},
          {"metadata", metadata},
          {"method", {{"type", "supervised"}, {"supervised", {{"hyperparameters", hyper}}}}}};
}

Json FineTuningJob::to_state_json(uint64_t seq) const {
  Json j = to_json();
  Json ckpts = Json::array();
  for (const FtCheckpoint& c : checkpoints) ckpts.push_back(checkpoint_state_json(c));
  j["keel"] = {{"seq", seq},   {"checkpoints", std::move(ckpts)}, {"adapter_path", adapter_path},
               {"step", step}, {"total_steps", total_steps},      {"state_step", state_step}};
  return j;
}

Result<std::pair<FineTuningJob, uint64_t>> fine_tuning_job_from_state_json(const Json& j) {
  FineTuningJob r;
  uint64_t seq = 0;
  try {
    r.id = j.at("id").get<std::string>();
    r.model = j.at("model").get<std::string>();
    r.training_file = j.at("training_file").get<std::string>();
    r.validation_file = ft_nullable_field<std::string>(j, "validation_file");
    r.suffix = ft_nullable_field<std::string>(j, "suffix");
    const Json& h = j.at("hyperparameters");
    r.hyperparameters.n_epochs = auto_field<int32_t>(h, "n_epochs");
    r.hyperparameters.batch_size = auto_field<int32_t>(h, "batch_size");
    r.hyperparameters.learning_rate_multiplier = auto_field<double>(h, "learning_rate_multiplier");
    r.seed = j.at("seed").get<int64_t>();
    r.metadata = j.at("metadata");
    const std::string status = j.at("status").get<std::string>();
    const std::optional<FtStatus> s = parse_ft_status(status);
    if (!s) return Status::corrupt(fmt::format("fine-tuning job: unknown status \"{}\"", status));
    r.status = *s;
    r.created_at = j.at("created_at").get<int64_t>();
    r.finished_at = ft_nullable_field<int64_t>(j, "finished_at");
    r.estimated_finish = ft_nullable_field<int64_t>(j, "estimated_finish");
    r.trained_tokens = ft_nullable_field<int64_t>(j, "trained_tokens");
    r.fine_tuned_model = ft_nullable_field<std::string>(j, "fine_tuned_model");
    if (const Json& e = j.at("error"); !e.is_null()) {
      r.error = FtError{e.at("code").get<std::string>(), e.at("message").get<std::string>(),
                        ft_nullable_field<std::string>(e, "param")};
    }
    r.result_files = j.at("result_files").get<std::vector<std::string>>();
    const Json& keel = j.at("keel");
    seq = keel.at("seq").get<uint64_t>();
    for (const Json& c : keel.at("checkpoints")) {
      r.checkpoints.push_back(checkpoint_from_state_json(c));
    }
    r.adapter_path = keel.at("adapter_path").get<std::string>();
    r.step = keel.at("step").get<int64_t>();
    r.total_steps = keel.at("total_steps").get<int64_t>();
    r.state_step = keel.at("state_step").get<int64_t>();
  } catch (const Json::exception& e) {
    return Status::corrupt(fmt::format("fine-tuning job: {}", e.what()));
  }
  return std::pair{std::move(r), seq};
}

std::string fine_tuning_results_csv(const std::vector<FtEvent>& events) {
  struct Row {
    std::optional<double> train_loss, train_accuracy, valid_loss, valid_accuracy;
  };
  std::map<int64_t, Row> rows;
  const auto number = [](const Json& data, const char* key) -> std::optional<double> {
    auto it = data.find(key);
    if (it == data.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  };
  for (const FtEvent& e : events) {
    if (!e.data.is_object() || !e.data.contains("step") || !e.data["step"].is_number_integer()) {
      continue;
    }
    Row& r = rows[e.data["step"].get<int64_t>()];
    if (e.metrics) {
      r.train_loss = number(e.data, "train_loss");
      r.train_accuracy = number(e.data, "train_mean_token_accuracy");
    }
    if (auto v = number(e.data, "valid_loss")) r.valid_loss = v;
    if (auto v = number(e.data, "valid_mean_token_accuracy")) r.valid_accuracy = v;
  }
  const auto cell = [](const std::optional<double>& v) {
    return v ? fmt::format("{:.6f}", *v) : std::string();
  };
  std::string out = "step,train_loss,train_accuracy,valid_loss,valid_mean_token_accuracy\n";
  for (const auto& [step, r] : rows) {
    if (!r.train_loss) continue;
    out += fmt::format("{},{},{},{},{}\n", step, cell(r.train_loss), cell(r.train_accuracy),
                       cell(r.valid_loss), cell(r.valid_accuracy));
  }
  return out;
}

std::string fine_tuned_model_name(std::string_view base, std::string_view suffix,
                                  std::string_view job_id) {
  std::string_view id = job_id;
  if (id.starts_with("ftjob-")) id.remove_prefix(6);
  return fmt::format("ft:{}:keel:{}:{}", base, suffix, id.substr(0, 8));
}

std::string checkpoint_model_name(std::string_view model, int64_t step) {
  return fmt::format("{}:ckpt-step-{}", model, step);
}

}  // namespace keel::server
