// /v1/fine_tuning/jobs over real HTTP against a FakeTuner (no model): the lifecycle (statuses in
// order through the events, metrics events, checkpoints served by name, the fine-tuned model in
// /v1/models, the results CSV), pagination, errors (unknown model, file, job; wrong purpose; a bad
// line failing the job with the line named), cancel effective at once, pause/resume continuing
// from the saved state, one training at a time in order, and a restart with a state directory
// (an interrupted job resumes from its last saved state; finished models are served again).
#include <gtest/gtest.h>

#include <thread>

#include "batch_test_client.h"
#include "fake_tuner.h"
#include "server_harness.h"
#include "support/test_support.h"

namespace keel::server::testing {
namespace fine_tuning_http {

using Json = nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::string conversations(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += R"({"messages": [{"role": "user", "content": "q"}, )"
           R"({"role": "assistant", "content": "a"}]})"
           "\n";
  }
  return out;
}

struct Harness {
  explicit Harness(int step_ms = 5, ServerConfig config = test_config())
      : tuner(step_ms),
        server(std::move(config), 256, nullptr, [this](ServerDeps* d) { d->fine_tuner = &tuner; }) {
  }
  uint16_t port() { return server.port(); }
  FakeTuner tuner;
  ServerHarness server;
};

std::string upload_data(uint16_t port, const std::string& content) {
  HttpResult up = upload(port, content, "fine-tune");
  EXPECT_EQ(up.status, 200) << up.body;
  return up.json()["id"];
}

HttpResult create(uint16_t port, Json body) {
  if (!body.contains("model")) body["model"] = "test-model";
  return post_json(port, "/v1/fine_tuning/jobs", body);
}

Json get_job(uint16_t port, const std::string& id) {
  return http_request(port, "GET", "/v1/fine_tuning/jobs/" + id).json();
}

// Polls the job until `pred` holds (or 10 s pass); the last job object.
template <typename Pred>
Json wait_job(uint16_t port, const std::string& id, Pred pred) {
  const auto deadline = steady_clock::now() + std::chrono::seconds(10);
  Json j = get_job(port, id);
  while (!pred(j) && steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
    j = get_job(port, id);
  }
  return j;
}
Json wait_status(uint16_t port, const std::string& id, const std::string& status) {
  return wait_job(port, id, [&](const Json& j) { return j["status"] == status; });
}

// Every event, oldest first.
std::vector<Json> events(uint16_t port, const std::string& id) {
  Json page = http_request(port, "GET", "/v1/fine_tuning/jobs/" + id + "/events?limit=1000").json();
  std::vector<Json> out(page["data"].rbegin(), page["data"].rend());
  return out;
}
std::vector<int64_t> metric_steps(uint16_t port, const std::string& id) {
  std::vector<int64_t> steps;
  for (const Json& e : events(port, id)) {
    if (e["type"] == "metrics") steps.push_back(e["data"]["step"]);
  }
  return steps;
}
// Index of the first event whose message starts with `prefix`, or -1.
int find_event(const std::vector<Json>& ev, const std::string& prefix) {
  for (size_t i = 0; i < ev.size(); ++i) {
    if (ev[i]["message"].get<std::string>().starts_with(prefix)) return static_cast<int>(i);
  }
  return -1;
}

TEST(FineTuningHttpTest, LifecycleThroughSuccess) {
  Harness h;
  const std::string train = upload_data(h.port(), conversations(3));
  const std::string valid = upload_data(h.port(), conversations(1));
  HttpResult c = create(
      h.port(),
      {{"training_file", train},
       {"validation_file", valid},
       {"suffix", "demo"},
       {"seed", 7},
       {"method",
        {{"type", "supervised"}, {"supervised", {{"hyperparameters", {{"n_epochs", 2}}}}}}}});
  ASSERT_EQ(c.status, 200) << c.body;
  const Json created = c.json();
  const std::string id = created["id"];
  EXPECT_TRUE(id.starts_with("ftjob-"));
  EXPECT_EQ(created["status"], "validating_files");
  EXPECT_EQ(created["hyperparameters"]["batch_size"], "auto");
  EXPECT_EQ(created["fine_tuned_model"], nullptr);
  EXPECT_EQ(created["seed"], 7);

  const Json done = wait_status(h.port(), id, "succeeded");
  ASSERT_EQ(done["status"], "succeeded") << done.dump();
  const std::string model = done["fine_tuned_model"];
  EXPECT_EQ(model, "ft:test-model:keel:demo:" + id.substr(6, 8));
  EXPECT_EQ(done["hyperparameters"],
            Json({{"n_epochs", 2}, {"batch_size", 1}, {"learning_rate_multiplier", 1.0}}));
  EXPECT_EQ(done["trained_tokens"], 60);
  EXPECT_TRUE(done["finished_at"].is_number());
  EXPECT_EQ(done["error"], nullptr);

  const std::vector<Json> ev = events(h.port(), id);
  const int validating = find_event(ev, "Validating training file");
  const int queued = find_event(ev, "Files validated");
  const int started = find_event(ev, "Fine-tuning job started");
  const int created_model = find_event(ev, "New fine-tuned model created");
  const int completed = find_event(ev, "The job has successfully completed");
  EXPECT_EQ(find_event(ev, "Created fine-tuning job"), 0);
  EXPECT_TRUE(0 < validating && validating < queued && queued < started &&
              started < created_model && created_model < completed)
      << validating << " " << queued << " " << started << " " << created_model << " " << completed;
  EXPECT_EQ(metric_steps(h.port(), id), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  for (const Json& e : ev) {
    EXPECT_EQ(e["object"], "fine_tuning.job.event");
    if (e["type"] != "metrics") continue;
    EXPECT_DOUBLE_EQ(e["data"]["train_loss"].get<double>(), 1.0 / e["data"]["step"].get<double>());
    EXPECT_EQ(e["data"]["total_steps"], 6);
  }
  Json page =
      http_request(h.port(), "GET", "/v1/fine_tuning/jobs/" + id + "/events?limit=2").json();
  ASSERT_EQ(page["data"].size(), 2u);
  EXPECT_EQ(page["has_more"], true);
  EXPECT_EQ(page["data"][0]["id"], ev.back()["id"]);  // newest first
  page = http_request(h.port(), "GET",
                      "/v1/fine_tuning/jobs/" + id +
                          "/events?after=" + page["last_id"].get<std::string>() + "&limit=1")
             .json();
  EXPECT_EQ(page["data"][0]["id"], ev[ev.size() - 3]["id"]);

  const Json ckpts =
      http_request(h.port(), "GET", "/v1/fine_tuning/jobs/" + id + "/checkpoints").json();
  ASSERT_EQ(ckpts["data"].size(), 2u);
  EXPECT_EQ(ckpts["data"][0]["step_number"], 6);  // newest first
  EXPECT_EQ(ckpts["data"][1]["fine_tuned_model_checkpoint"], model + ":ckpt-step-3");
  EXPECT_EQ(ckpts["data"][1]["metrics"]["valid_loss"], 2.0 / 3);
  const Json models = http_request(h.port(), "GET", "/v1/models").json();
  std::vector<std::string> ids;
  for (const Json& m : models["data"]) ids.push_back(m["id"]);
  for (const std::string& want : {model, model + ":ckpt-step-3", model + ":ckpt-step-6"}) {
    EXPECT_NE(std::find(ids.begin(), ids.end(), want), ids.end()) << want;
  }
  // The fine-tuned model answers a chat request by name.
  HttpResult chat = post_json(
      h.port(), "/v1/chat/completions",
      {{"model", model}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}});
  EXPECT_EQ(chat.status, 200) << chat.body;

  ASSERT_EQ(done["result_files"].size(), 1u);
  const std::string csv =
      http_request(h.port(), "GET",
                   "/v1/files/" + done["result_files"][0].get<std::string>() + "/content")
          .body;
  EXPECT_TRUE(
      csv.starts_with("step,train_loss,train_accuracy,valid_loss,"
                      "valid_mean_token_accuracy\n1,1.000000,0.500000,,\n"))
      << csv;
  EXPECT_NE(csv.find("\n3,0.333333,0.500000,0.666667,0.250000\n"), std::string::npos) << csv;
  HttpResult again = http_request(h.port(), "POST", "/v1/fine_tuning/jobs/" + id + "/cancel");
  EXPECT_EQ(again.status, 400);
  EXPECT_EQ(again.json()["error"]["code"], "invalid_job_status");
}

TEST(FineTuningHttpTest, Errors) {
  Harness h;
  const std::string train = upload_data(h.port(), conversations(2));
  HttpResult r = create(h.port(), {{"model", "no-such-model"}, {"training_file", train}});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.json()["error"]["code"], "model_not_found");
  r = create(h.port(), {{"training_file", "file-missing"}});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.json()["error"]["code"], "file_not_found");
  EXPECT_EQ(r.json()["error"]["param"], "training_file");
  r = create(h.port(), {{"training_file", train}, {"validation_file", "file-missing"}});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.json()["error"]["param"], "validation_file");
  const std::string batch_file = upload(h.port(), "{}\n").json()["id"];
  r = create(h.port(), {{"training_file", batch_file}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["param"], "training_file");
  r = create(h.port(), {{"training_file", train}, {"hyperparameters", {{"n_epochs", 100}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["param"], "hyperparameters.n_epochs");
  EXPECT_EQ(http_request(h.port(), "POST", "/v1/fine_tuning/jobs", "{").status, 400);
  for (const char* path :
       {"/v1/fine_tuning/jobs/ftjob-none", "/v1/fine_tuning/jobs/ftjob-none/events",
        "/v1/fine_tuning/jobs/ftjob-none/checkpoints"}) {
    HttpResult g = http_request(h.port(), "GET", path);
    EXPECT_EQ(g.status, 404) << path;
    EXPECT_EQ(g.json()["error"]["code"], "fine_tuning_job_not_found") << path;
  }
  EXPECT_EQ(http_request(h.port(), "POST", "/v1/fine_tuning/jobs/ftjob-none/pause").status, 404);
  EXPECT_EQ(http_request(h.port(), "GET", "/v1/fine_tuning/jobs/x/cancel").status, 405);
  EXPECT_EQ(http_request(h.port(), "GET", "/v1/fine_tuning/jobs?limit=0").status, 400);

  // A bad line fails the job with the line named.
  const std::string bad = upload_data(h.port(), conversations(2) + "{\"prompt\": \"x\"}\n");
  r = create(h.port(), {{"training_file", bad}});
  ASSERT_EQ(r.status, 200) << r.body;
  const Json failed = wait_status(h.port(), r.json()["id"], "failed");
  ASSERT_EQ(failed["status"], "failed") << failed.dump();
  EXPECT_EQ(failed["error"]["code"], "invalid_training_file");
  EXPECT_EQ(failed["error"]["param"], "training_file");
  const std::string message = failed["error"]["message"];
  EXPECT_NE(message.find("line 3"), std::string::npos) << message;
  EXPECT_NE(message.find(bad), std::string::npos) << message;
  EXPECT_EQ(failed["fine_tuned_model"], nullptr);
  const std::vector<Json> ev = events(h.port(), r.json()["id"]);
  EXPECT_EQ(ev.back()["level"], "error");

  // Without a trainer the API says so.
  ServerHarness off;
  const std::string f = upload_data(off.port(), conversations(1));
  r = create(off.port(), {{"training_file", f}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["code"], "fine_tuning_unavailable");
  EXPECT_EQ(http_request(off.port(), "GET", "/v1/fine_tuning/jobs").json()["data"], Json::array());
}

TEST(FineTuningHttpTest, CancelStopsTrainingAtOnce) {
  Harness h(/*step_ms=*/20);
  const std::string train = upload_data(h.port(), conversations(50));
  const std::string id =
      create(h.port(), {{"training_file", train}, {"hyperparameters", {{"n_epochs", 20}}}})
          .json()["id"];
  const Json running = wait_job(h.port(), id, [&](const Json& j) {
    return j["status"] == "running" && !metric_steps(h.port(), id).empty();
  });
  ASSERT_EQ(running["status"], "running");
  EXPECT_TRUE(running["estimated_finish"].is_number());
  const auto asked = steady_clock::now();
  HttpResult c = http_request(h.port(), "POST", "/v1/fine_tuning/jobs/" + id + "/cancel");
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(c.json()["status"], "cancelled");
  EXPECT_TRUE(c.json()["finished_at"].is_number());
  while (h.tuner.running() > 0 && steady_clock::now() - asked < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(milliseconds(2));
  }
  EXPECT_EQ(h.tuner.running(), 0);
  EXPECT_LE(h.tuner.last_return() - asked, milliseconds(1000));
  const size_t steps = metric_steps(h.port(), id).size();
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(metric_steps(h.port(), id).size(), steps);  // no step after the stop
  EXPECT_LT(steps, 1000u);
  EXPECT_EQ(get_job(h.port(), id)["status"], "cancelled");
  EXPECT_EQ(http_request(h.port(), "POST", "/v1/fine_tuning/jobs/" + id + "/resume").status, 400);
}

TEST(FineTuningHttpTest, PauseAndResumeContinueWhereTheJobStopped) {
  Harness h(/*step_ms=*/10);
  const std::string train = upload_data(h.port(), conversations(10));
  const std::string id =
      create(h.port(), {{"training_file", train}, {"hyperparameters", {{"n_epochs", 3}}}})
          .json()["id"];
  ASSERT_EQ(wait_job(h.port(), id,
                     [&](const Json&) { return metric_steps(h.port(), id).size() >= 3; })["status"],
            "running");
  HttpResult p = http_request(h.port(), "POST", "/v1/fine_tuning/jobs/" + id + "/pause");
  ASSERT_EQ(p.status, 200) << p.body;
  EXPECT_EQ(p.json()["status"], "paused");
  // The state is saved once the training stopped.
  wait_job(h.port(), id, [&](const Json&) {
    return find_event(events(h.port(), id), "Training stopped at step") >= 0;
  });
  const size_t paused_at = metric_steps(h.port(), id).size();
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(metric_steps(h.port(), id).size(), paused_at);
  EXPECT_EQ(get_job(h.port(), id)["status"], "paused");
  HttpResult r = http_request(h.port(), "POST", "/v1/fine_tuning/jobs/" + id + "/resume");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["status"], "queued");
  ASSERT_EQ(wait_status(h.port(), id, "succeeded")["status"], "succeeded");
  std::vector<int64_t> want(30);
  for (int64_t i = 0; i < 30; ++i) want[i] = i + 1;
  EXPECT_EQ(metric_steps(h.port(), id), want);  // each step once: it went on where it stopped
  const std::vector<std::string> resumes = h.tuner.resumes();
  ASSERT_EQ(resumes.size(), 2u);
  EXPECT_EQ(resumes[0], "");
  EXPECT_EQ(resumes[1], "step=" + std::to_string(paused_at));
  EXPECT_GE(find_event(events(h.port(), id), "Fine-tuning job resumed from step"), 0);
}

TEST(FineTuningHttpTest, OneTrainingAtATimeInOrder) {
  Harness h(/*step_ms=*/10);
  const std::string train = upload_data(h.port(), conversations(5));
  const Json body = {{"training_file", train}, {"hyperparameters", {{"n_epochs", 2}}}};
  const std::string first = create(h.port(), body).json()["id"];
  const std::string second = create(h.port(), body).json()["id"];
  ASSERT_EQ(wait_status(h.port(), first, "running")["status"], "running");
  EXPECT_EQ(wait_status(h.port(), second, "queued")["status"], "queued");
  EXPECT_EQ(get_job(h.port(), first)["status"], "running");
  ASSERT_EQ(wait_status(h.port(), second, "succeeded")["status"], "succeeded");
  const Json a = get_job(h.port(), first);
  EXPECT_EQ(a["status"], "succeeded");
  EXPECT_LE(a["finished_at"], get_job(h.port(), second)["finished_at"]);
  const Json list = http_request(h.port(), "GET", "/v1/fine_tuning/jobs?limit=1").json();
  ASSERT_EQ(list["data"].size(), 1u);
  EXPECT_EQ(list["data"][0]["id"], second);  // newest first
  EXPECT_EQ(list["has_more"], true);
  const Json rest = http_request(h.port(), "GET", "/v1/fine_tuning/jobs?after=" + second).json();
  ASSERT_EQ(rest["data"].size(), 1u);
  EXPECT_EQ(rest["data"][0]["id"], first);
  EXPECT_EQ(rest["has_more"], false);
}

TEST(FineTuningHttpTest, RestartResumesFromTheSavedStateAndServesFinishedModels) {
  ServerConfig config = test_config();
  config.state_dir = keel::testing::make_temp_dir("fine-tuning-restart");
  std::string done_id, running_id, done_model;
  int64_t saved_step = 0;
  {
    Harness h(/*step_ms=*/10, config);
    const std::string train = upload_data(h.port(), conversations(4));
    done_id = create(h.port(), {{"training_file", train}, {"hyperparameters", {{"n_epochs", 1}}}})
                  .json()["id"];
    done_model = wait_status(h.port(), done_id, "succeeded")["fine_tuned_model"];
    running_id =
        create(h.port(), {{"training_file", train}, {"hyperparameters", {{"n_epochs", 50}}}})
            .json()["id"];
    // Past the first checkpoint (4 steps an epoch), then the server stops mid-run.
    wait_job(h.port(), running_id,
             [&](const Json&) { return metric_steps(h.port(), running_id).size() >= 6; });
  }
  {
    Harness h(/*step_ms=*/1, config);
    // The finished job's model is served again once the engine is ready.
    const auto deadline = steady_clock::now() + std::chrono::seconds(5);
    bool served = false;
    while (!served && steady_clock::now() < deadline) {
      for (const engine::LoraInfo& l : h.server.engine().list_loras())
        served |= l.name == done_model;
      std::this_thread::sleep_for(milliseconds(5));
    }
    EXPECT_TRUE(served);
    const Json again = wait_status(h.port(), running_id, "succeeded");
    ASSERT_EQ(again["status"], "succeeded") << again.dump();
    const std::vector<std::string> resumes = h.tuner.resumes();
    ASSERT_EQ(resumes.size(), 1u);
    ASSERT_TRUE(resumes[0].starts_with("step=")) << resumes[0];
    saved_step = std::stoll(resumes[0].substr(5));
    EXPECT_GE(saved_step, 6);
    std::vector<int64_t> want(200);
    for (int64_t i = 0; i < 200; ++i) want[i] = i + 1;
    EXPECT_EQ(metric_steps(h.port(), running_id), want);  // no step lost or repeated
    EXPECT_GE(find_event(events(h.port(), running_id), "The server restarted"), 0);
    EXPECT_EQ(get_job(h.port(), done_id)["status"], "succeeded");
  }
}

}  // namespace fine_tuning_http
}  // namespace keel::server::testing
