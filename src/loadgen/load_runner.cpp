// run_load: the arrival loop, the concurrency gate and completion tracking on one io_context;
// http_get through net's HTTP client.
#include "loadgen/load_runner.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>
#include <chrono>
#include <cmath>
#include <exception>
#include <nlohmann/json.hpp>

#include "loadgen/arrivals.h"
#include "loadgen/stream_chunk.h"
#include "net/http_client.h"

namespace keel::loadgen {
namespace {

namespace asio = boost::asio;
using asio::awaitable;
using SteadyTp = std::chrono::steady_clock::time_point;

constexpr uint64_t kMaxGetBodyBytes = uint64_t{16} << 20;

// State of one run, owned by run_load's frame; coroutines hold a pointer to it.
struct Run {
  const RunnerConfig* config;
  const std::vector<PlannedRequest>* requests;
  HttpClient* client;
  asio::steady_timer* wake;  // cancelled whenever a request completes
  std::vector<RequestRecord> records;
  std::vector<double> schedule;  // planned arrival offsets, s
  double start_s = 0.0;          // run start on the client clock
  double last_end_s = 0.0;       // latest completion on the client clock
  int64_t in_flight = 0;
};

awaitable<void> wait_for_wake(Run* run) {
  boost::system::error_code ec;
  run->wake->expires_at(SteadyTp::max());
  co_await run->wake->async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

awaitable<void> one_request(Run* run, size_t idx) {
  RequestRecord& rec = run->records[idx];
  try {
    StreamPost post;
    post.path = run->config->endpoint;
    post.body = (*run->requests)[idx].body;
    if (!run->config->request_id_prefix.empty()) {
      post.request_id = run->config->request_id_prefix + std::to_string(idx);
    }
    post.chat = run->config->chat;
    post.keep_text = run->config->keep_text;
    post.disconnect_after = (*run->requests)[idx].disconnect_after;
    co_await run->client->stream_post(std::move(post), &rec);
  } catch (const std::exception& e) {
    rec.success = false;
    rec.error = std::string("client error: ") + e.what();
  }
  run->last_end_s = std::max(run->last_end_s, run->client->now_s());
  if (run->config->on_complete) {
    try {
      run->config->on_complete(rec);
    } catch (...) {
      // progress reporting must not break the run
    }
  }
  --run->in_flight;
  run->wake->cancel();
}

awaitable<void> drive(Run* run) {
  const Status resolved = co_await run->client->resolve();
  if (!resolved.ok()) {
    for (RequestRecord& r : run->records) r.error = resolved.message();
    co_return;
  }
  const LoadConfig& load = run->config->load;
  asio::steady_timer arrival(co_await asio::this_coro::executor);
  // start_s is read first, so every timer deadline (from start_tp) is at or after the planned
  // arrival recorded from start_s: no request is ever sent before its scheduled_s.
  run->start_s = run->client->now_s();
  const SteadyTp start_tp = std::chrono::steady_clock::now();
  run->last_end_s = run->start_s;
  for (size_t i = 0; i < run->records.size(); ++i) {
    const double offset = run->schedule[i];
    if (offset > 0.0) {
      arrival.expires_at(start_tp + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                        std::chrono::duration<double>(offset)));
      boost::system::error_code ec;
      co_await arrival.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    while (load.max_concurrency > 0 && run->in_flight >= load.max_concurrency) {
      co_await wait_for_wake(run);
    }
    run->records[i].scheduled_s = run->start_s + offset;
    ++run->in_flight;
    asio::co_spawn(arrival.get_executor(), one_request(run, i), asio::detached);
  }
  while (run->in_flight > 0) co_await wait_for_wake(run);
}

}  // namespace

Status LoadConfig::validate() const {
  if (!(request_rate > 0.0)) {
    return Status::invalid_argument("request-rate must be > 0 (or inf), got " +
                                    std::to_string(request_rate));
  }
  if (!(burstiness > 0.0) || std::isinf(burstiness)) {
    return Status::invalid_argument("burstiness must be a finite number > 0, got " +
                                    std::to_string(burstiness));
  }
  if (max_concurrency < 0) {
    return Status::invalid_argument("max-concurrency must be >= 0 (0 = unlimited), got " +
                                    std::to_string(max_concurrency));
  }
  return Status();
}

Result<RunOutput> run_load(const RunnerConfig& config,
                           const std::vector<PlannedRequest>& requests) {
  KEEL_TRY(config.load.validate());
  asio::io_context io(1);
  SteadyClock clock;
  HttpClient client(io.get_executor(), config.client, &clock, clock.now_ns());
  asio::steady_timer wake(io);
  Run run{.config = &config, .requests = &requests, .client = &client, .wake = &wake};
  run.records.resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    run.records[i].index = static_cast<int64_t>(i);
    run.records[i].prompt_len = requests[i].prompt_len;
  }
  run.schedule = arrival_schedule(static_cast<int64_t>(requests.size()), config.load.request_rate,
                                  config.load.burstiness, config.load.seed);
  asio::co_spawn(io, drive(&run), asio::detached);
  try {
    io.run();
  } catch (const std::exception& e) {
    return Status::internal(std::string("load loop: ") + e.what());
  }
  RunOutput out;
  for (RequestRecord& r : run.records) {
    r.start_s -= run.start_s;
    r.scheduled_s -= run.start_s;
  }
  out.records = std::move(run.records);
  out.duration_s = run.last_end_s - run.start_s;
  out.connections_opened = client.connections_opened();
  return out;
}

Result<std::string> http_get(const ClientConfig& config, const std::string& path) {
  const std::string where = config.target.host + ":" + config.target.port;
  net::HttpRequest req;
  req.url.host = config.target.host;
  int port = 0;
  const auto [end, ec] = std::from_chars(
      config.target.port.data(), config.target.port.data() + config.target.port.size(), port);
  if (ec != std::errc() || port <= 0 || port > 65535) {
    return Status::invalid_argument("GET " + path + ": bad port in " + where);
  }
  req.url.port = static_cast<uint16_t>(port);
  req.url.target = config.target.base_path + path;
  req.headers = {{"User-Agent", "keel-bench-serve"}};
  if (!config.api_key.empty())
    req.headers.emplace_back("Authorization", "Bearer " + config.api_key);
  for (const auto& header : config.headers) req.headers.push_back(header);
  net::HttpOptions options;
  options.timeout = std::chrono::milliseconds(std::llround(config.request_timeout_s * 1000.0));
  options.scope = net::TimeoutScope::kEachOperation;  // no progress this long fails the GET
  options.max_body_bytes = kMaxGetBodyBytes;
  KEEL_ASSIGN_OR_RETURN(net::HttpResponse answer, net::http_call(req, options));
  if (answer.head.status != 200) {
    return Status::unavailable("GET " + path + ": HTTP " + std::to_string(answer.head.status) +
                               " " + answer.head.reason + ": " +
                               error_message_from_body(answer.body));
  }
  return std::move(answer.body);
}

Result<std::string> fetch_first_model(const ClientConfig& config) {
  Result<std::string> body = http_get(config, "/v1/models");
  if (!body.ok()) return body.error();
  const auto list = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (list.is_discarded() || !list.is_object() || !list.contains("data") ||
      !list["data"].is_array()) {
    return Status::corrupt("GET /v1/models: the response is not a model list");
  }
  for (const auto& m : list["data"]) {
    if (m.is_object() && m.contains("id") && m["id"].is_string()) return m["id"].get<std::string>();
  }
  return Status::not_found("GET /v1/models: the server lists no model");
}

}  // namespace keel::loadgen
