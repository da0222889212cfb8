// run_generation (see generation_handler.h).
#include "server/generation_handler.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "core/log.h"
#include "server/async_signal.h"
#include "server/event_relay.h"
#include "server/generation_choices.h"
#include "server/prompt_preparation.h"

namespace keel::server {
namespace {

// Aborts every unfinished engine request and closes the relay when the request ends — also when
// the coroutine frame is destroyed during shutdown.
class InflightGuard {
 public:
  InflightGuard(GenerationWork* work, EventRelay* relay) : work_(work), relay_(relay) {}
  InflightGuard(const InflightGuard&) = delete;
  InflightGuard& operator=(const InflightGuard&) = delete;
  ~InflightGuard() { release(); }
  void release() {
    relay_->close();
    work_->abort_unfinished();
  }

 private:
  GenerationWork* work_;
  EventRelay* relay_;
};

// Chat and completions: GenerationChoices as a GenerationWork.
class ChoicesWork final : public GenerationWork {
 public:
  explicit ChoicesWork(GenerationChoices* choices) : c_(*choices) {}
  [[nodiscard]] size_t num_choices() const override { return c_.num_choices(); }
  [[nodiscard]] engine::GenerationRequest request(size_t choice) const override {
    return c_.request(choice);
  }
  void placed(size_t choice, engine::RequestKey key) override { c_.placed(choice, key); }
  void consume(size_t choice, engine::TokenEvent event, std::string* sse) override {
    c_.consume(choice, std::move(event), sse);
  }
  void abort_unfinished() override { c_.abort_unfinished(); }
  [[nodiscard]] bool all_done() const override { return c_.all_done(); }
  [[nodiscard]] const std::optional<ApiError>& failure() const override { return c_.failure(); }
  [[nodiscard]] bool streaming() const override { return c_.spec().stream; }
  [[nodiscard]] const std::string& request_id() const override { return c_.request_id(); }
  std::string stream_head() override { return {}; }
  std::string stream_tail() override { return c_.stream_tail(); }
  std::string final_body() override { return c_.final_body(); }
  std::string stream_error(const ApiError& error) override {
    std::string tail = error_event(error);
    tail += kDoneEvent;
    return tail;
  }

 private:
  GenerationChoices& c_;
};

// A tenant's admission under its quotas (tenants.h) and, when the request ends however it
// ends, its usage settled: prompt tokens of every choice and the tokens generated.
class TenantUsage {
 public:
  TenantUsage() = default;
  TenantUsage(const TenantUsage&) = delete;
  TenantUsage& operator=(const TenantUsage&) = delete;
  ~TenantUsage() {
    if (admitted_) tenants_->settle(tenant_, entry_id_, prompt_tokens_, generated_tokens_);
  }
  // Nothing (and no headers) for a request without a tenant; else the 429 to answer, if any.
  std::optional<ApiError> admit(Tenants* tenants, const GenerationWork& work, HeaderList* headers) {
    if (tenants == nullptr || work.num_choices() == 0) return std::nullopt;
    int64_t estimate = 0;
    for (size_t i = 0; i < work.num_choices(); ++i) {
      const engine::GenerationRequest r = work.request(i);
      if (i == 0) tenant_ = r.tenant;
      prompt_tokens_ += r.num_original_prompt_tokens();
      estimate += r.num_original_prompt_tokens() + r.max_new_tokens();
    }
    if (tenant_.empty()) return std::nullopt;
    Tenants::Decision d = tenants->admit(tenant_, estimate);
    headers->insert(headers->end(), d.headers.begin(), d.headers.end());
    if (d.error) return d.error;
    tenants_ = tenants;
    entry_id_ = d.entry_id;
    admitted_ = true;
    return std::nullopt;
  }
  void generated(size_t n) { generated_tokens_ += static_cast<int64_t>(n); }

 private:
  Tenants* tenants_ = nullptr;
  std::string tenant_;
  uint64_t entry_id_ = 0;
  bool admitted_ = false;
  int64_t prompt_tokens_ = 0;
  int64_t generated_tokens_ = 0;
};

class GenerationRun {
 public:
  GenerationRun(HttpConnection& conn, GenerationWork& work, const HeaderList& headers,
                net::any_io_executor strand)
      : conn_(conn),
        ctx_(conn.context()),
        headers_(headers),
        work_(work),
        signal_(strand),
        relay_(std::make_shared<EventRelay>(strand, &signal_)),
        guard_(&work_, relay_.get()) {}

  net::awaitable<bool> execute();

 private:
  using Deadline = AsyncSignal::Clock::time_point;
  // Submits every choice (EngineClient::submit_async) and waits on the strand until each is
  // placed: an engine that holds a request (the gateway's activator, while no TE is ready) holds
  // no io thread. The first refusal (or the deadline) is the error; false in `*connection_ok`
  // when the client went away meanwhile.
  net::awaitable<std::optional<ApiError>> place_all(Deadline deadline, bool* connection_ok);
  // Consumes events (streaming them) until every choice is done, one fails, the client goes
  // away or the deadline passes.
  net::awaitable<std::optional<ApiError>> run_to_end(Deadline deadline, bool* connection_ok);
  // Drains queued events into the work; appends SSE events to `out` when streaming.
  void process_events(std::string* out) {
    while (std::optional<EventRelay::Item> item = relay_->pop()) {
      usage_.generated(item->event.tokens.size());
      work_.consume(item->choice, std::move(item->event), out);
    }
  }
  net::awaitable<bool> finish_ok();
  net::awaitable<bool> finish_error(const ApiError& error, bool streaming_started);
  [[nodiscard]] bool streaming() const { return work_.streaming(); }

  HttpConnection& conn_;
  ServerContext& ctx_;
  HeaderList headers_;  // the common ones, then the tenant's x-ratelimit-* (when it has one)
  GenerationWork& work_;
  TenantUsage usage_;
  AsyncSignal signal_;
  std::shared_ptr<EventRelay> relay_;
  InflightGuard guard_;  // declared after relay_: runs first at destruction
};

net::awaitable<bool> GenerationRun::finish_ok() {
  // Named values, not temporaries, across co_await (GCC 12 miscompiles some temporaries there).
  if (streaming()) {
    const std::string tail = work_.stream_tail();
    if (!co_await conn_.write_stream(tail)) co_return false;
    co_return co_await conn_.end_stream();
  }
  std::string body = work_.final_body();
  HttpResponse response = HttpResponse::json(200, std::move(body)).with_headers(headers_);
  co_return co_await conn_.write_response(std::move(response));
}

net::awaitable<bool> GenerationRun::finish_error(const ApiError& error, bool streaming_started) {
  if (!streaming_started) {
    co_return co_await conn_.write_response(HttpResponse::error(error).with_headers(headers_));
  }
  const std::string tail = work_.stream_error(error);
  if (!co_await conn_.write_stream(tail)) co_return false;
  co_return co_await conn_.end_stream();
}

ApiError request_timeout(int64_t timeout_ms) {
  return ApiError::timeout(fmt::format("The request did not finish within {} ms.", timeout_ms));
}

net::awaitable<std::optional<ApiError>> GenerationRun::place_all(Deadline deadline,
                                                                 bool* connection_ok) {
  engine::EngineClient* engine = ctx_.deps.engine;
  size_t started = 0, placed = 0;
  std::optional<ApiError> refused;
  const auto collect = [&] {
    while (std::optional<EventRelay::Placement> p = relay_->pop_placement()) {
      ++placed;
      if (p->key.ok()) {
        work_.placed(p->choice, *p->key);
      } else if (!refused) {
        refused = ApiError::from_status(p->key.status());
      }
    }
  };
  // In order, stopping at a refusal known at once (a local engine answers inline).
  for (size_t i = 0; i < work_.num_choices() && !refused; ++i) {
    engine->submit_async(work_.request(i), relay_->make_sink(i), relay_->make_done(i, engine));
    ++started;
    collect();
  }
  while (placed < started && !refused) {
    if (conn_.peer_closed()) {
      *connection_ok = false;
      break;
    }
    if (!co_await signal_.wait_until(deadline) && AsyncSignal::Clock::now() >= deadline) {
      co_return request_timeout(ctx_.config.request_timeout_ms);
    }
    collect();
  }
  co_return refused;
}

net::awaitable<std::optional<ApiError>> GenerationRun::run_to_end(Deadline deadline,
                                                                  bool* connection_ok) {
  for (;;) {
    std::string out;
    process_events(&out);
    if (streaming() && !out.empty() && !co_await conn_.write_stream(out)) {
      *connection_ok = false;
      co_return std::nullopt;
    }
    if (work_.failure()) co_return work_.failure();
    if (work_.all_done()) co_return std::nullopt;
    if (conn_.peer_closed()) {
      *connection_ok = false;
      co_return std::nullopt;
    }
    if (!co_await signal_.wait_until(deadline) && AsyncSignal::Clock::now() >= deadline) {
      co_return request_timeout(ctx_.config.request_timeout_ms);
    }
  }
}

net::awaitable<bool> GenerationRun::execute() {
  const int64_t timeout_ms = ctx_.config.request_timeout_ms;
  const Deadline deadline = timeout_ms > 0
                                ? AsyncSignal::Clock::now() + std::chrono::milliseconds(timeout_ms)
                                : Deadline::max();
  if (std::optional<ApiError> refused = usage_.admit(ctx_.tenants.get(), work_, &headers_)) {
    HttpResponse response = HttpResponse::error(*refused).with_headers(headers_);
    co_return co_await conn_.write_response(std::move(response));
  }
  conn_.watch_peer(&signal_);  // from the start: a client may leave while its request is held
  bool connection_ok = true;
  bool stream_started = false;
  std::optional<ApiError> error = co_await place_all(deadline, &connection_ok);
  if (!error && connection_ok && streaming()) {
    stream_started = co_await conn_.begin_stream(headers_);
    connection_ok = stream_started;
    const std::string head = work_.stream_head();
    if (connection_ok && !head.empty()) connection_ok = co_await conn_.write_stream(head);
  }
  if (!error && connection_ok) error = co_await run_to_end(deadline, &connection_ok);
  guard_.release();  // aborts whatever is still running or held (disconnect, error, timeout)
  co_await conn_.unwatch_peer();
  if (!connection_ok) {
    KEEL_LOG_DEBUG("request {}: client went away; engine requests aborted", work_.request_id());
    co_return false;
  }
  if (error) co_return co_await finish_error(*error, stream_started);
  co_return co_await finish_ok();
}

}  // namespace

net::awaitable<bool> run_generation_work(HttpConnection& conn, GenerationWork& work,
                                         const HeaderList& headers) {
  GenerationRun run(conn, work, headers, conn.executor());
  co_return co_await run.execute();
}

net::awaitable<bool> run_generation(HttpConnection& conn, GenerationSpec spec, HeaderList headers,
                                    std::string request_id) {
  const ServerContext& ctx = conn.context();
  PreparedPrompts prepared = co_await conn.on_tokenizer<PreparedPrompts>(
      [&ctx, &spec] { return prepare_prompts(ctx, spec); });
  if (prepared.error) {
    co_return co_await conn.write_response(
        HttpResponse::error(*prepared.error).with_headers(headers));
  }
  GenerationChoices choices(ctx, std::move(spec), std::move(prepared.prompts), request_id);
  ChoicesWork work(&choices);
  co_return co_await run_generation_work(conn, work, headers);
}

}  // namespace keel::server
