// ServerDeps (what the server is given) and ServerContext (what every connection shares): the
// config, the engine and tokenizer, the chat formatter, readiness and draining state, and the
// request-id source, the Batch API's stores (files, batch records) and runner, the Responses
// API's store and background runner, and the fine-tuning API's store, runner and trainer.
// Created by Server::start and alive until the server is destroyed.
//
// Thread safety: everything here is immutable after start, atomic or internally locked;
// EngineClient, Tokenizer and the ChatFormatter are thread-safe by contract.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "core/result.h"
#include "engine/engine_client.h"
#include "server/batch_store.h"
#include "server/body_budget.h"
#include "server/chat_formatter.h"
#include "server/file_store.h"
#include "server/fine_tuning_store.h"
#include "server/reasoning_split.h"
#include "server/responses_store.h"
#include "server/server_config.h"
#include "server/tenants.h"
#include "server/tool_format.h"
#include "tokenizer/tokenizer.h"

namespace keel::server {

class BatchRunner;
class FineTuner;
class FineTuningRunner;
class ResponsesBackground;

// A fleet's readiness as the cluster gateway's /health reports it (ServerDeps::fleet_health).
struct FleetHealth {
  bool reachable = true;  // a job executor answered
  // The job executors that do not answer, each named with why ("je-0 (host:port): link closed";
  // "" when all do): /health names them rather than blaming the TEs.
  std::string job_executors_down;
  int32_t serving_tes = 0;  // TEs of the model that are healthy or busy
  // The gateway holds requests while no TE serves (its activator, with an autoscaler: scale to
  // zero), for up to this long; 0: none are held (they fail at once).
  double activation_timeout_s = 0;
  int64_t held_requests = 0;  // held now
};

struct ServerDeps {
  engine::EngineClient* engine = nullptr;           // required; must outlive the Server
  const tokenizer::Tokenizer* tokenizer = nullptr;  // required; must outlive the Server
  ChatFormatter chat;  // required for /v1/chat/completions and /tokenize with messages
  // Optional readiness flag (e.g. false while the model loads): when false, /health answers 503
  // and generation routes 503. nullptr means always ready. Must outlive the Server.
  const std::atomic<bool>* ready = nullptr;
  // Optional, for a server in front of a fleet (the cluster gateway): Prometheus text appended to
  // /metrics, and the JSON document GET /v1/cluster/status answers (404 when unset; its error
  // → 503). Thread-safe; must outlive the Server.
  std::function<std::string()> extra_metrics;
  std::function<Result<std::string>()> cluster_status;
  // Optional, a fleet's readiness (the cluster gateway). /health answers 200 while a TE serves
  // or the gateway's activator would hold requests until one does (scale to zero: the gateway
  // that wakes the fleet must stay in its load balancer), 503 otherwise (no JE answers, or no TE
  // serves and nothing is held); generation routes take requests either way. Thread-safe; must
  // outlive the Server.
  std::function<FleetHealth()> fleet_health;
  // How the chat template's model writes tool calls (detect_tool_format on the template's text);
  // the default is keel's generic convention with tools described in the system prompt.
  ToolFormat tool_format;
  // How the model's chat output is split into thinking and answer (--reasoning-parser;
  // reasoning_split.h); kNone: the whole output is content.
  ReasoningParser reasoning_parser = ReasoningParser::kNone;
  // Optional, the trainer of /v1/fine_tuning/jobs (fine_tuner.h; `keel serve` gives
  // host::FinetuneBackend); null: fine-tuning is off. Thread-safe; must outlive the Server.
  FineTuner* fine_tuner = nullptr;
};

// 128-bit random-looking hex ids: a per-server random salt mixed with a counter (no lock).
class RequestIdSource {
 public:
  RequestIdSource();
  [[nodiscard]] std::string next();

 private:
  uint64_t salt_;
  std::atomic<uint64_t> counter_{0};
};

struct ServerContext {
  explicit ServerContext(ServerConfig cfg)
      : config(std::move(cfg)),
        body_budget(config.max_inflight_body_bytes),
        files(config.max_body_bytes, config.max_file_store_bytes),
        responses(static_cast<size_t>(config.max_stored_responses),
                  config.max_response_store_bytes) {}

  ServerConfig config;
  ServerDeps deps;
  int64_t created_unix = 0;           // reported as the model's `created`
  std::atomic<bool> draining{false};  // stop_accepting() called
  // shutdown() started: a connection that becomes idle closes instead of waiting for a request
  // (those idle already are closed by shutdown itself).
  std::atomic<bool> closing{false};
  RequestIdSource ids;
  BodyBudget body_budget;  // request bodies held in memory (thread-safe)
  FileStore files;         // /v1/files (thread-safe)
  BatchStore batches;      // /v1/batches records (thread-safe)
  // Runs the batches (thread-safe); set by Server::start, owned by the Server, stopped before the
  // context goes away.
  BatchRunner* batch_runner = nullptr;
  ResponsesStore responses;  // /v1/responses stored responses (thread-safe)
  // Runs `background: true` responses (thread-safe); set by Server::start like batch_runner.
  ResponsesBackground* responses_background = nullptr;
  FineTuningStore fine_tuning;  // /v1/fine_tuning/jobs, their events and states (thread-safe)
  // Runs the fine-tuning jobs (thread-safe); set by Server::start when deps.fine_tuner is, like
  // batch_runner.
  FineTuningRunner* fine_tuning_runner = nullptr;
  // The API keys file's tenants (thread-safe); set by Server::start when config.api_keys_file is.
  std::unique_ptr<Tenants> tenants;

  [[nodiscard]] bool ready() const {
    return deps.ready == nullptr || deps.ready->load(std::memory_order_acquire);
  }
};

}  // namespace keel::server
