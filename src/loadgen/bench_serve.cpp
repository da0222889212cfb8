// run_bench_serve: the steps of a benchmark run in order; see the header.
#include "loadgen/bench_serve.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "loadgen/gauge_poller.h"
#include "loadgen/rng.h"

namespace keel::loadgen {
namespace {

std::string local_date() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

Result<std::vector<PlannedRequest>> plan(const BenchServeConfig& c,
                                         const std::vector<PromptSpec>& prompts) {
  RequestBodyOptions opts;
  opts.api = api_kind_for(c.endpoint);
  opts.model = c.model;
  opts.temperature = c.temperature;
  opts.ignore_eos = c.ignore_eos;
  opts.extra_body = c.extra_body;
  std::vector<PlannedRequest> out;
  out.reserve(prompts.size());
  Rng hang_ups(c.workload.seed ^ 0x6b65656c68616e67u);  // its own stream: prompts stay the same
  for (const PromptSpec& p : prompts) {
    PlannedRequest r;
    KEEL_ASSIGN_OR_RETURN(r.body, build_request_body(p, opts));
    r.prompt_len = p.prompt_len;
    if (c.disconnect_prob > 0.0 && hang_ups.uniform01() < c.disconnect_prob) {
      r.disconnect_after = hang_ups.uniform_int(0, std::max<int64_t>(c.workload.output_len, 1) - 1);
    }
    out.push_back(std::move(r));
  }
  return out;
}

constexpr std::chrono::seconds kProgressEvery{5};

// A progress line at most every kProgressEvery, and one when the last request ends.
std::function<void(const RequestRecord&)> progress_reporter(int64_t total, const NoteSink& note) {
  struct State {
    int64_t done = 0;
    int64_t failed = 0;
    int64_t cancelled = 0;
    std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
  };
  auto state = std::make_shared<State>();
  return [state, total, note](const RequestRecord& r) {
    ++state->done;
    if (r.cancelled) {
      ++state->cancelled;
    } else if (!r.success) {
      ++state->failed;
    }
    const auto now = std::chrono::steady_clock::now();
    if (state->done == total || now - state->last >= kProgressEvery) {
      state->last = now;
      note(state->cancelled > 0 ? fmt::format("  {}/{} requests done ({} failed, {} cancelled)",
                                              state->done, total, state->failed, state->cancelled)
                                : fmt::format("  {}/{} requests done ({} failed)", state->done,
                                              total, state->failed));
    }
  };
}

}  // namespace

Status BenchServeConfig::validate() const {
  KEEL_TRY(parse_base_url(base_url).status());
  if (endpoint.empty() || endpoint.front() != '/') {
    return Status::invalid_argument("endpoint must start with '/', got '" + endpoint + "'");
  }
  if (!(request_timeout_s > 0.0)) {
    return Status::invalid_argument("request-timeout must be > 0 seconds");
  }
  KEEL_TRY(workload.validate());
  KEEL_TRY(load.validate());
  if (api_kind_for(endpoint) == ApiKind::kChatCompletions &&
      workload.format == PromptFormat::kTokenIds) {
    return Status::invalid_argument(
        "token-id prompts cannot be sent to a chat endpoint; use --prompt-format text");
  }
  if (!(temperature >= 0.0)) {
    return Status::invalid_argument("temperature must be >= 0");
  }
  if (length_bucket < 0) return Status::invalid_argument("length-bucket must be >= 0");
  if (!(kv_poll_s > 0.0)) return Status::invalid_argument("kv-poll-interval must be > 0 seconds");
  if (!(disconnect_prob >= 0.0 && disconnect_prob <= 1.0)) {
    return Status::invalid_argument("disconnect-prob must be in [0, 1]");
  }
  if (!extra_body.is_object()) return Status::invalid_argument("extra-body must be a JSON object");
  for (double p : percentiles) {
    if (!(p >= 0.0 && p <= 100.0)) {
      return Status::invalid_argument(fmt::format("percentile {} is outside [0, 100]", p));
    }
  }
  for (const auto* slo : {&goodput.ttft_ms, &goodput.tpot_ms, &goodput.e2el_ms}) {
    if (*slo && !(**slo >= 0.0)) return Status::invalid_argument("goodput SLOs must be >= 0 ms");
  }
  return Status();
}

Result<BenchServeResult> run_bench_serve(BenchServeConfig config, const NoteSink& note) {
  auto say = [&](const std::string& s) {
    if (note) note(s);
  };
  KEEL_TRY(config.validate());
  BenchServeResult result;
  result.date = local_date();
  RunnerConfig runner;
  KEEL_ASSIGN_OR_RETURN(runner.client.target, parse_base_url(config.base_url));
  runner.client.api_key = config.api_key;
  runner.client.headers = config.headers;
  runner.client.request_timeout_s = config.request_timeout_s;
  runner.endpoint = config.endpoint;
  runner.chat = api_kind_for(config.endpoint) == ApiKind::kChatCompletions;
  runner.keep_text = config.keep_text;
  runner.load = config.load;
  runner.request_id_prefix = fmt::format("keel-bench-{}-", result.date);

  if (config.model.empty()) {
    auto model = fetch_first_model(runner.client);
    if (!model.ok()) return model.error().with_prefix("cannot find a model at " + config.base_url);
    config.model = *model;
    say("Model: " + config.model + " (first of GET /v1/models)");
  }
  KEEL_ASSIGN_OR_RETURN(std::vector<PromptSpec> prompts, generate_workload(config.workload));
  KEEL_ASSIGN_OR_RETURN(std::vector<PlannedRequest> planned, plan(config, prompts));

  if (config.initial_test) {
    say("Starting initial single prompt test run...");
    RunnerConfig test = runner;
    test.load = LoadConfig{};
    test.request_id_prefix += "test-";
    PlannedRequest first = planned.front();
    first.disconnect_after = -1;  // the test request always reads to the end
    KEEL_ASSIGN_OR_RETURN(RunOutput out, run_load(test, {first}));
    if (!out.records.front().success) {
      return Status::unavailable("initial test request failed: " + out.records.front().error);
    }
    say("Initial test run completed. Starting main benchmark run...");
  }
  say(fmt::format("Traffic request rate: {}", config.load.request_rate));
  say(fmt::format("Burstiness factor: {} ({})", config.load.burstiness,
                  config.load.burstiness == 1.0 ? "Poisson process" : "Gamma distribution"));
  say(config.load.max_concurrency > 0
          ? fmt::format("Maximum request concurrency: {}", config.load.max_concurrency)
          : std::string("Maximum request concurrency: None"));
  if (note) runner.on_complete = progress_reporter(config.workload.num_prompts, note);
  std::optional<GaugePoller> poller;
  if (config.length_bucket > 0) {
    poller.emplace(runner.client, "keel:kv_cache_usage_perc", config.kv_poll_s);
    poller->start();
  }
  KEEL_ASSIGN_OR_RETURN(RunOutput out, run_load(runner, planned));
  if (poller) {
    const std::vector<GaugeSample> kv = poller->stop();
    result.by_output_length = profile_by_output_length(out.records, config.length_bucket, kv);
  }
  result.metrics = compute_metrics(out.records, out.duration_s, config.percentiles, config.goodput);
  result.records = std::move(out.records);
  result.connections_opened = out.connections_opened;
  result.config = std::move(config);
  return result;
}

}  // namespace keel::loadgen
