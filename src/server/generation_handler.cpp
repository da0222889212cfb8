// run_generation (see generation_handler.h).
#include "server/generation_handler.h"

#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <memory>
#include <optional>
#include <vector>

#include "core/log.h"
#include "server/async_signal.h"
#include "server/choice_output.h"
#include "server/event_relay.h"
#include "server/prompt_preparation.h"
#include "server/response_builder.h"

namespace keel::server {
namespace {

struct Slot {
  size_t prompt = 0;
  int32_t index = 0;  // choice index in the response: prompt * n + i
  engine::RequestKey key = 0;
  bool submitted = false;
  bool done = false;        // finished, or aborted by us
  bool sent_first = false;  // chat: role chunk sent; completions: echo text sent
  std::unique_ptr<ChoiceOutput> out;
};

// Aborts every unfinished engine request and closes the relay when the request ends — also when
// the coroutine frame is destroyed during shutdown.
class InflightGuard {
 public:
  InflightGuard(engine::EngineClient* engine, std::vector<Slot>* slots, EventRelay* relay)
      : engine_(engine), slots_(slots), relay_(relay) {}
  InflightGuard(const InflightGuard&) = delete;
  InflightGuard& operator=(const InflightGuard&) = delete;
  ~InflightGuard() { release(); }
  void release() {
    relay_->close();
    for (Slot& s : *slots_) {
      if (s.submitted && !s.done) {
        engine_->abort(s.key);
        s.done = true;
      }
    }
  }

 private:
  engine::EngineClient* engine_;
  std::vector<Slot>* slots_;
  EventRelay* relay_;
};

class GenerationRun {
 public:
  GenerationRun(HttpConnection& conn, GenerationSpec spec, std::vector<PreparedPrompt> prompts,
                HeaderList headers, const std::string& request_id, net::any_io_executor strand)
      : conn_(conn),
        ctx_(conn.context()),
        engine_(ctx_.deps.engine),
        spec_(std::move(spec)),
        prompts_(std::move(prompts)),
        headers_(std::move(headers)),
        request_id_(request_id),
        signal_(strand),
        relay_(std::make_shared<EventRelay>(strand, &signal_)),
        guard_(engine_, &slots_, relay_.get()) {
    meta_.kind = spec_.kind;
    meta_.id = (spec_.kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-") + request_id_;
    meta_.created = static_cast<int64_t>(std::time(nullptr));
    meta_.model = spec_.model.empty() ? ctx_.config.served_model_name : spec_.model;
  }

  net::awaitable<bool> execute();

 private:
  std::optional<ApiError> submit_all();
  engine::GenerationRequest make_request(const Slot& slot) const;
  // Drains queued events into the choices; appends SSE events to `out` when streaming.
  void process_events(std::string* out);
  void stream_delta(Slot& slot, ChoiceDelta& delta, std::string* out);
  net::awaitable<bool> finish_ok();
  net::awaitable<bool> finish_error(const ApiError& error, bool streaming_started);
  Usage usage() const;

  HttpConnection& conn_;
  ServerContext& ctx_;
  engine::EngineClient* engine_;
  GenerationSpec spec_;
  std::vector<PreparedPrompt> prompts_;
  HeaderList headers_;
  std::string request_id_;
  ResponseMeta meta_;
  AsyncSignal signal_;
  std::shared_ptr<EventRelay> relay_;
  std::vector<Slot> slots_;
  InflightGuard guard_;  // declared after slots_ and relay_: runs first at destruction
  size_t num_done_ = 0;
  std::optional<ApiError> failure_;  // first choice error (engine error or abort)
};

engine::GenerationRequest GenerationRun::make_request(const Slot& slot) const {
  const PreparedPrompt& p = prompts_[slot.prompt];
  engine::GenerationRequest r;
  r.request_id = fmt::format("{}-{}", request_id_, slot.index);
  r.prompt_tokens = p.tokens;
  r.sampling = spec_.sampling;
  if (r.sampling.seed) *r.sampling.seed += static_cast<uint64_t>(slot.index % spec_.n);
  r.max_tokens = p.max_tokens;
  r.ignore_eos = spec_.ignore_eos;
  r.stop_token_ids = spec_.stop_token_ids;
  r.stop_strings = spec_.stop;
  r.cache_salt = spec_.cache_salt;
  r.pic_chunks = p.pic_chunks;
  r.pic_link = spec_.pic_link;
  if (spec_.sparse_policy)
    r.sparse = engine::SparseParams{*spec_.sparse_policy, spec_.sparse_budget};
  return r;
}

std::optional<ApiError> GenerationRun::submit_all() {
  const tokenizer::Tokenizer& tok = *ctx_.deps.tokenizer;
  slots_.resize(prompts_.size() * static_cast<size_t>(spec_.n));
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    s.prompt = i / static_cast<size_t>(spec_.n);
    s.index = static_cast<int32_t>(i);
    const std::string& echo = prompts_[s.prompt].text;
    s.out = std::make_unique<ChoiceOutput>(
        tok, ChoiceOutputOptions{.stops = spec_.stop,
                                 .logprobs = spec_.logprobs,
                                 .accumulate = !spec_.stream,
                                 .text_offset_base = spec_.echo ? count_code_points(echo) : 0});
  }
  for (Slot& s : slots_) {
    Result<engine::RequestKey> key = engine_->submit(make_request(s), relay_->make_sink(s.index));
    if (!key.ok()) return ApiError::from_status(key.error());
    s.key = *key;
    s.submitted = true;
  }
  return std::nullopt;
}

void GenerationRun::stream_delta(Slot& slot, ChoiceDelta& d, std::string* out) {
  const bool chat = spec_.kind == ApiKind::kChat;
  if (!slot.sent_first && (d.first_tokens || d.finish)) {
    slot.sent_first = true;
    if (chat) {
      *out += chunk_event(meta_, {.index = slot.index, .role = true, .text = std::string()},
                          spec_.include_usage);
    } else if (spec_.echo) {
      d.text.insert(0, prompts_[slot.prompt].text);
    }
  }
  if (!d.text.empty() || !d.logprobs.empty()) {
    *out += chunk_event(meta_,
                        {.index = slot.index,
                         .text = std::move(d.text),
                         .has_logprobs = spec_.logprobs,
                         .logprobs = d.logprobs},
                        spec_.include_usage);
  }
  if (d.finish) {
    ChunkChoice c{.index = slot.index, .finish_reason = d.finish};
    c.stop_reason = slot.out->stop_reason();
    if (!chat) c.text = std::string();
    *out += chunk_event(meta_, c, spec_.include_usage);
  }
}

void GenerationRun::process_events(std::string* out) {
  while (std::optional<EventRelay::Item> item = relay_->pop()) {
    Slot& slot = slots_[item->choice];
    if (slot.done) continue;  // nothing follows a final event; defensive
    ChoiceDelta d = slot.out->consume(std::move(item->event));
    if (slot.out->finished()) {
      slot.done = true;
      ++num_done_;
    }
    if (d.error) {
      if (!failure_) {
        failure_ = d.engine_abort ? ApiError::unavailable(*d.error) : ApiError::internal(*d.error);
      }
      continue;
    }
    if (spec_.stream) stream_delta(slot, d, out);
  }
}

Usage GenerationRun::usage() const {
  Usage u;
  for (const PreparedPrompt& p : prompts_) u.prompt_tokens += static_cast<int64_t>(p.tokens.size());
  for (const Slot& s : slots_) {
    u.completion_tokens += s.out->num_generated();
    if (s.index % spec_.n == 0) u.cached_tokens += s.out->num_cached_tokens();
  }
  return u;
}

net::awaitable<bool> GenerationRun::finish_ok() {
  if (spec_.stream) {
    std::string tail;
    if (spec_.include_usage) tail += usage_event(meta_, usage());
    tail += kDoneEvent;
    if (!co_await conn_.write_stream(tail)) co_return false;
    co_return co_await conn_.end_stream();
  }
  std::vector<FinishedChoice> choices;
  choices.reserve(slots_.size());
  for (const Slot& s : slots_) {
    FinishedChoice c;
    c.index = s.index;
    c.text = spec_.echo ? prompts_[s.prompt].text + s.out->text() : s.out->text();
    c.finish_reason = s.out->finish_reason().value_or("stop");
    c.stop_reason = s.out->stop_reason();
    c.has_logprobs = spec_.logprobs;
    c.logprobs = s.out->logprobs();
    choices.push_back(std::move(c));
  }
  co_return co_await conn_.write_response(
      HttpResponse::json(200, completion_body(meta_, choices, usage())).with_headers(headers_));
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
  if (std::optional<ApiError> e = submit_all()) {
    guard_.release();
    co_return co_await finish_error(*e, false);
  }
  if (spec_.stream && !co_await conn_.begin_stream(headers_)) co_return false;
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
    if (spec_.stream && !out.empty() && !co_await conn_.write_stream(out)) {
      connection_ok = false;
      break;
    }
    if (failure_) {
      error = failure_;
      break;
    }
    if (num_done_ == slots_.size()) break;
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
    KEEL_LOG_DEBUG("request {}: client went away; engine requests aborted", request_id_);
    co_return false;
  }
  if (error) co_return co_await finish_error(*error, spec_.stream);
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
