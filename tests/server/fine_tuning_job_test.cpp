// The fine-tuning API's pure pieces: the status rules, "auto" hyperparameters, the job, event and
// checkpoint objects as OpenAI shapes them, the state-store JSON round trip, the model names, the
// results CSV, and the create body's checks (fine_tuning_request.h).
#include <gtest/gtest.h>

#include "server/fine_tuning_job.h"
#include "server/fine_tuning_request.h"

namespace keel::server {
namespace fine_tuning_job_test {

using Json = nlohmann::json;

TEST(FineTuningJobTest, StatusRules) {
  using S = FtStatus;
  using A = FtAction;
  for (S s : {S::kValidatingFiles, S::kQueued, S::kRunning, S::kPaused}) {
    EXPECT_EQ(status_after(s, A::kCancel), S::kCancelled) << ft_status_name(s);
  }
  for (S s : {S::kSucceeded, S::kFailed, S::kCancelled}) {
    EXPECT_TRUE(is_terminal(s));
    for (A a : {A::kCancel, A::kPause, A::kResume}) EXPECT_FALSE(status_after(s, a).has_value());
  }
  EXPECT_EQ(status_after(S::kRunning, A::kPause), S::kPaused);
  EXPECT_EQ(status_after(S::kQueued, A::kPause), S::kPaused);
  EXPECT_FALSE(status_after(S::kValidatingFiles, A::kPause).has_value());
  EXPECT_FALSE(status_after(S::kPaused, A::kPause).has_value());
  EXPECT_EQ(status_after(S::kPaused, A::kResume), S::kQueued);
  EXPECT_FALSE(status_after(S::kRunning, A::kResume).has_value());
  for (S s : {S::kValidatingFiles, S::kQueued, S::kRunning, S::kPaused, S::kSucceeded, S::kFailed,
              S::kCancelled}) {
    EXPECT_EQ(parse_ft_status(ft_status_name(s)), s);
  }
  EXPECT_FALSE(parse_ft_status("done").has_value());
}

TEST(FineTuningJobTest, AutoHyperparameters) {
  FtHyperparameters h;
  FtHyperparameters r = resolve_hyperparameters(h, 10);  // 10 × 3 < 100: 10 epochs
  EXPECT_EQ(r.n_epochs, 10);
  EXPECT_EQ(r.batch_size, 1);
  EXPECT_EQ(r.learning_rate_multiplier, 1.0);
  EXPECT_EQ(resolve_hyperparameters(h, 2).n_epochs, 25);   // capped
  EXPECT_EQ(resolve_hyperparameters(h, 500).n_epochs, 3);  // the target
  EXPECT_EQ(resolve_hyperparameters(h, 500).batch_size, 1);
  EXPECT_EQ(resolve_hyperparameters(h, 20'000).n_epochs, 1);  // 25,000 examples at most
  EXPECT_EQ(resolve_hyperparameters(h, 20'000).batch_size, 40);
  EXPECT_EQ(resolve_hyperparameters(h, 1'000'000).batch_size, 256);
  h.n_epochs = 7;
  h.batch_size = 4;
  h.learning_rate_multiplier = 0.5;
  r = resolve_hyperparameters(h, 10);
  EXPECT_EQ(r.n_epochs, 7);
  EXPECT_EQ(r.batch_size, 4);
  EXPECT_EQ(r.learning_rate_multiplier, 0.5);
}

FineTuningJob sample_job() {
  FineTuningJob j;
  j.id = "ftjob-0123456789abcdef01234567";
  j.model = "stories";
  j.training_file = "file-a";
  j.validation_file = "file-b";
  j.suffix = "mine";
  j.hyperparameters.n_epochs = 2;
  j.seed = 42;
  j.status = FtStatus::kSucceeded;
  j.created_at = 1700000000;
  j.finished_at = 1700000100;
  j.trained_tokens = 1234;
  j.fine_tuned_model = fine_tuned_model_name("stories", "mine", j.id);
  j.result_files = {"file-c"};
  FtCheckpoint c;
  c.id = "ftckpt-1";
  c.created_at = 1700000050;
  c.step = 10;
  c.model = checkpoint_model_name(*j.fine_tuned_model, 10);
  c.adapter_path = "/tmp/x/ckpt-step-10.gguf";
  c.train_loss = 0.5;
  c.train_accuracy = 0.75;
  c.valid_loss = 0.625;
  c.valid_accuracy = 0.5;
  j.checkpoints = {c};
  j.adapter_path = "/tmp/x/model.gguf";
  j.step = j.total_steps = 20;
  return j;
}

TEST(FineTuningJobTest, ObjectsAsOpenAiShapesThem) {
  const FineTuningJob j = sample_job();
  EXPECT_EQ(*j.fine_tuned_model, "ft:stories:keel:mine:01234567");
  EXPECT_EQ(fine_tuned_model_name("m", "", "ftjob-abcdef0123"), "ft:m:keel::abcdef01");
  const Json o = j.to_json();
  EXPECT_EQ(o["object"], "fine_tuning.job");
  EXPECT_EQ(o["status"], "succeeded");
  EXPECT_EQ(o["hyperparameters"],
            Json({{"n_epochs", 2}, {"batch_size", "auto"}, {"learning_rate_multiplier", "auto"}}));
  EXPECT_EQ(o["method"]["type"], "supervised");
  EXPECT_EQ(o["method"]["supervised"]["hyperparameters"], o["hyperparameters"]);
  EXPECT_EQ(o["error"], nullptr);
  EXPECT_EQ(o["estimated_finish"], nullptr);
  EXPECT_EQ(o["trained_tokens"], 1234);
  EXPECT_EQ(o["result_files"], Json::array({"file-c"}));
  EXPECT_FALSE(o.contains("keel"));
  for (const char* k : {"id", "created_at", "finished_at", "fine_tuned_model", "organization_id",
                        "validation_file", "training_file", "seed", "integrations", "metadata"}) {
    EXPECT_TRUE(o.contains(k)) << k;
  }
  const Json c = j.checkpoints[0].to_json(j.id);
  EXPECT_EQ(c["object"], "fine_tuning.job.checkpoint");
  EXPECT_EQ(c["fine_tuned_model_checkpoint"], "ft:stories:keel:mine:01234567:ckpt-step-10");
  EXPECT_EQ(c["fine_tuning_job_id"], j.id);
  EXPECT_EQ(c["step_number"], 10);
  EXPECT_EQ(c["metrics"]["train_loss"], 0.5);
  EXPECT_EQ(c["metrics"]["train_mean_token_accuracy"], 0.75);
  EXPECT_EQ(c["metrics"]["valid_loss"], 0.625);
  EXPECT_EQ(c["metrics"]["full_valid_mean_token_accuracy"], 0.5);
  EXPECT_FALSE(c.contains("adapter_path"));

  FtEvent e;
  e.id = "ftevent-1";
  e.message = "Step 1/2: training loss=0.5";
  e.metrics = true;
  e.data = {{"step", 1}, {"train_loss", 0.5}};
  const Json ej = e.to_json();
  EXPECT_EQ(ej["object"], "fine_tuning.job.event");
  EXPECT_EQ(ej["type"], "metrics");
  EXPECT_EQ(ej["level"], "info");
  EXPECT_EQ(e.step(), 1);
  auto back = ft_event_from_json(ej);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->to_json(), ej);
  EXPECT_FALSE(ft_event_from_json(Json{{"id", "x"}}).ok());
}

TEST(FineTuningJobTest, StateJsonRoundTrip) {
  FineTuningJob j = sample_job();
  j.error = FtError{"invalid_training_file", "line 3: bad", "training_file"};
  j.state_step = 10;
  auto back = fine_tuning_job_from_state_json(j.to_state_json(7));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->second, 7u);
  EXPECT_EQ(back->first.to_state_json(7), j.to_state_json(7));
  EXPECT_EQ(back->first.checkpoints[0].adapter_path, "/tmp/x/ckpt-step-10.gguf");
  EXPECT_EQ(back->first.state_step, 10);
  Json broken = j.to_state_json(7);
  broken["status"] = "done";
  EXPECT_EQ(fine_tuning_job_from_state_json(broken).status().code(), StatusCode::kCorrupt);
  broken.erase("keel");
  EXPECT_EQ(fine_tuning_job_from_state_json(broken).status().code(), StatusCode::kCorrupt);
}

TEST(FineTuningJobTest, ResultsCsv) {
  std::vector<FtEvent> events(4);
  events[0].metrics = events[1].metrics = true;
  events[0].data = {{"step", 1}, {"train_loss", 2.0}, {"train_mean_token_accuracy", 0.25}};
  events[1].data = {{"step", 2}, {"train_loss", 1.0}, {"train_mean_token_accuracy", 0.5}};
  events[2].data = {{"step", 2}, {"valid_loss", 1.5}, {"valid_mean_token_accuracy", 0.125}};
  events[3].message = "no data";
  EXPECT_EQ(fine_tuning_results_csv(events),
            "step,train_loss,train_accuracy,valid_loss,valid_mean_token_accuracy\n"
            "1,2.000000,0.250000,,\n"
            "2,1.000000,0.500000,1.500000,0.125000\n");
}

ApiResult<FineTuningCreate> parse(const std::string& text) {
  return parse_fine_tuning_create(Json::parse(text));
}

TEST(FineTuningRequestTest, ReadsBothHyperparameterForms) {
  auto a = parse(R"({"model": "m", "training_file": "file-a", "suffix": "x.y-z_1", "seed": 5,
                     "hyperparameters": {"n_epochs": 4, "batch_size": "auto",
                                         "learning_rate_multiplier": 2.5}})");
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a.value().hyperparameters.n_epochs, 4);
  EXPECT_FALSE(a.value().hyperparameters.batch_size.has_value());
  EXPECT_EQ(a.value().hyperparameters.learning_rate_multiplier, 2.5);
  EXPECT_EQ(a.value().seed, 5);
  EXPECT_EQ(a.value().suffix, "x.y-z_1");
  auto b = parse(R"({"model": "m", "training_file": "file-a", "validation_file": "file-b",
                     "method": {"type": "supervised",
                                "supervised": {"hyperparameters": {"n_epochs": 2}}},
                     "integrations": [], "metadata": {"k": "v"}})");
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b.value().hyperparameters.n_epochs, 2);
  EXPECT_EQ(b.value().validation_file, "file-b");
  EXPECT_EQ(b.value().metadata, Json({{"k", "v"}}));
  EXPECT_FALSE(b.value().seed.has_value());
}

TEST(FineTuningRequestTest, NamesTheBadField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"training_file": "f"})", "model"},
      {R"({"model": "m"})", "training_file"},
      {R"({"model": "m", "training_file": 3})", "training_file"},
      {R"({"model": "m", "training_file": "f", "hyperparameters": {"n_epochs": 0}})",
       "hyperparameters.n_epochs"},
      {R"({"model": "m", "training_file": "f", "hyperparameters": {"batch_size": "big"}})",
       "hyperparameters.batch_size"},
      {R"({"model": "m", "training_file": "f",
           "hyperparameters": {"learning_rate_multiplier": -1}})",
       "hyperparameters.learning_rate_multiplier"},
      {R"({"model": "m", "training_file": "f", "hyperparameters": 3})", "hyperparameters"},
      {R"({"model": "m", "training_file": "f", "method": {"type": "dpo"}})", "method.type"},
      {R"({"model": "m", "training_file": "f",
           "method": {"supervised": {"hyperparameters": {"n_epochs": 51}}}})",
       "method.supervised.hyperparameters.n_epochs"},
      {R"({"model": "m", "training_file": "f", "hyperparameters": {},
           "method": {"supervised": {"hyperparameters": {}}}})",
       "hyperparameters"},
      {R"({"model": "m", "training_file": "f", "suffix": "a:b"})", "suffix"},
      {R"({"model": "m", "training_file": "f", "suffix": ""})", "suffix"},
      {R"({"model": "m", "training_file": "f", "seed": -1})", "seed"},
      {R"({"model": "m", "training_file": "f", "integrations": [{"type": "wandb"}]})",
       "integrations"},
      {R"({"model": "m", "training_file": "f", "metadata": {"k": 1}})", "metadata"},
  };
  for (const auto& [body, param] : cases) {
    auto r = parse(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.error().status, 400) << body;
    EXPECT_EQ(r.error().param, param) << body << ": " << r.error().message;
  }
  EXPECT_FALSE(parse_fine_tuning_create(Json::array()).ok());
}

}  // namespace fine_tuning_job_test
}  // namespace keel::server
