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
  InflightGuard(GenerationChoices* choices, EventRelay* relay) : choices_(choices), relay_(relay) {}
  InflightGuard(const InflightGuard&) = delete;
  InflightGuard& operator=(const InflightGuard&) = delete;
  ~InflightGuard() { release(); }
  void release() {
    relay_->close();
    choices_->abort_unfinished();
  }

 private:
  GenerationChoices* choices_;
  EventRelay* relay_;
};

class GenerationRun {
 public:
  GenerationRun(HttpConnection& conn, GenerationSpec spec, std::vector<PreparedPrompt> prompts,
                HeaderList headers, const std::string& request_id, net::any_io_executor strand)
      : conn_(conn),
        ctx_(conn.context()),
        headers_(std::move(headers)),
        choices_(ctx_, std::move(spec), std::move(prompts), request_id),
        signal_(strand),
        relay_(std::make_shared<EventRelay>(strand, &signal_)),
        guard_(&choices_, relay_.get()) {}

  net::awaitable<bool> execute();

 private:
  // Drains queued events into the choices; appends SSE events to `out` when streaming.
  void process_events(std::string* out) {
    while (std::optional<EventRelay::Item> item = relay_->pop()) {
      choices_.consume(item->choice, std::move(item->event), out);
    }
  }
  net::awaitable<bool> finish_ok();
  net::awaitable<bool> finish_error(const ApiError& error, bool streaming_started);
  [[nodiscard]] bool streaming() const { return choices_.spec().stream; }

  HttpConnection& conn_;
  ServerContext& ctx_;
  HeaderList headers_;
  GenerationChoices choices_;
  AsyncSignal signal_;
  std::shared_ptr<EventRelay> relay_;
  InflightGuard guard_;  // declared after choices_ and relay_: runs first at destruction
};

net::awaitable<bool> GenerationRun::finish_ok() {
  // Named values, not temporaries, across co_await (GCC 12 miscompiles some temporaries there).
  if (streaming()) {
    const std::string tail = choices_.stream_tail();
    if (!co_await conn_.write_stream(tail)) co_return false;
    co_return co_await conn_.end_stream();
  }
  std::string body = choices_.final_body();
  HttpResponse response = HttpResponse::json(200, std::move(body)).with_headers(headers_);
  co_return co_await conn_.write_response(std::move(response));
}

net::awaitable<bool> GenerationRun::finish_error(const ApiError& error, bool streaming_started) {
  if (!streaming_started) {
    co_return co_await conn_.write_response(HttpResponse::error(error).with_headers(headers_));
  }
  std::string tail = error_event(error);
  tail += kDoneEvent;
  if (!co_await conn_.write_stream(tail)) co_return false;
  co_return co_await conn_.end_stream();
}

net::awaitable<bool> GenerationRun::execute() {
  const GenerationChoices::SinkFactory make_sink = [this](size_t choice) {
    return relay_->make_sink(choice);
  };
  std::optional<ApiError> submit_error = choices_.submit_all(make_sink);
  if (submit_error) {
    guard_.release();
    co_return co_await finish_error(*submit_error, false);
  }
  if (streaming() && !co_await conn_.begin_stream(headers_)) co_return false;
  conn_.watch_peer(&signal_);
  const int64_t timeout_ms = ctx_.config.request_timeout_ms;
  const auto deadline = timeout_ms > 0
                            ? AsyncSignal::Clock::now() + std::chrono::milliseconds(timeout_ms)
                            : AsyncSignal::Clock::time_point::max();
  bool connection_ok = true;
  std::optional<ApiError> error;
  for (;;) {
    std::string out;
    process_events(&out);
    if (streaming() && !out.empty() && !co_await conn_.write_stream(out)) {
      connection_ok = false;
      break;
    }
    if (choices_.failure()) {
      error = choices_.failure();
      break;
    }
    if (choices_.all_done()) break;
    if (conn_.peer_closed()) {
      connection_ok = false;
      break;
    }
    if (!co_await signal_.wait_until(deadline) && AsyncSignal::Clock::now() >= deadline) {
      error =
          ApiError::timeout(fmt::format("The request did not finish within {} ms.", timeout_ms));
      break;
    }
  }
  guard_.release();  // aborts whatever is still running (disconnect, error, timeout)
  co_await conn_.unwatch_peer();
  if (!connection_ok) {
    KEEL_LOG_DEBUG("request {}: client went away; engine requests aborted", choices_.request_id());
    co_return false;
  }
  if (error) co_return co_await finish_error(*error, streaming());
  co_return co_await finish_ok();
}

}  // namespace

net::awaitable<bool> run_generation(HttpConnection& conn, GenerationSpec spec, HeaderList headers,
                                    std::string request_id) {
  const ServerContext& ctx = conn.context();
  PreparedPrompts prepared = co_await conn.on_tokenizer<PreparedPrompts>(
      [&ctx, &spec] { return prepare_prompts(ctx, spec); });
  if (prepared.error) {
    co_return co_await conn.write_response(
        HttpResponse::error(*prepared.error).with_headers(headers));
  }
  GenerationRun run(conn, std::move(spec), std::move(prepared.prompts), std::move(headers),
                    request_id, conn.executor());
  co_return co_await run.execute();
}

}  // namespace keel::server
