// run_cache_create (see cache_handler.h).
#include "server/cache_handler.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "server/async_signal.h"
#include "server/context_cache.h"
#include "server/event_relay.h"
#include "server/pic_segments.h"
#include "server/prompt_preparation.h"

namespace keel::server {
namespace {

struct Tokenized {  // default-constructible (crosses a co_spawn)
  std::vector<int32_t> tokens;
  std::optional<ApiError> error;
};

Tokenized tokenize(const ServerContext& ctx, const CacheSpec& spec) {
  Tokenized out;
  const tokenizer::Tokenizer& tok = *ctx.deps.tokenizer;
  if (spec.kind == ApiKind::kChat) {
    if (!ctx.deps.chat) {
      out.error =
          ApiError::bad_request("This server has no chat template; cache a `prompt`.", "messages");
      return out;
    }
    Result<tokenizer::TrackedText> text =
        ctx.deps.chat(plain_tool_messages(ctx, spec.messages),
                      /*add_generation_prompt=*/false, nullptr, nullptr);
    if (!text.ok()) {
      out.error = ApiError::from_status(text.error(), "messages");
      return out;
    }
    out.error = refuse_if_provably_long(ctx, ApiKind::kChat, text->text, 1);
    if (out.error) return out;
    // A context cache is one exact prefix: position-independent marks do not apply to it.
    // Message contents (plain spans) are text, never special tokens.
    out.tokens = tok.encode(strip_pic_marks(*text), /*add_special=*/true, /*parse_special=*/true);
  } else if (spec.prompt.is_tokens) {
    out.tokens = spec.prompt.tokens;
  } else {
    out.error = refuse_if_provably_long(ctx, ApiKind::kCompletion, spec.prompt.text, 1);
    if (out.error) return out;
    out.tokens = tok.encode(spec.prompt.text, /*add_special=*/true, /*parse_special=*/true);
  }
  const ApiKind kind = spec.kind;
  const int64_t len = static_cast<int64_t>(out.tokens.size());
  if (len == 0) {
    out.error = ApiError::bad_request("The cached context is empty (it tokenizes to no tokens).",
                                      kind == ApiKind::kChat ? "messages" : "prompt");
  } else if (len + 1 > ctx.deps.engine->max_model_len()) {  // room for one more token at least
    out.error = context_length_error(kind, ctx.deps.engine->max_model_len(), len, 1);
  }
  return out;
}

}  // namespace

net::awaitable<bool> run_cache_create(HttpConnection& conn, CacheSpec spec, HeaderList headers,
                                      std::string request_id) {
  ServerContext& ctx = conn.context();
  Tokenized t =
      co_await conn.on_tokenizer<Tokenized>([&ctx, &spec] { return tokenize(ctx, spec); });
  if (t.error)
    co_return co_await conn.write_response(HttpResponse::error(*t.error).with_headers(headers));

  const std::string id = "cache-" + ctx.ids.next();
  CacheDescription description;
  description.kind = spec.kind;
  description.model = ctx.config.served_model_name;
  description.messages = std::move(spec.messages);

  engine::GenerationRequest r;
  r.request_id = request_id;
  r.prompt_tokens = std::move(t.tokens);
  r.sampling.temperature = 0.0f;
  r.max_tokens = 1;
  r.ignore_eos = true;
  r.cache_salt = spec.cache_salt;
  // The engine owns the cache from here: it pins the blocks when the request finishes, keeps the
  // description, and expires the cache ttl after that.
  r.retain_as = id;
  r.retain_ms = spec.ttl_seconds * 1000;
  r.retain_description = encode_cache_description(description);
  engine::ContextCacheInfo made;  // the answer, should the cache be gone already when asked
  made.id = id;
  made.cache_salt = spec.cache_salt;
  made.tokens = r.prompt_tokens;
  made.ttl_ms = r.retain_ms;
  made.created_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();

  AsyncSignal signal(conn.executor());
  // Closes the relay however this frame ends (also when destroyed at shutdown); a request that
  // did not report its end is aborted and its pin, if it got one already, released.
  struct Guard {
    std::shared_ptr<EventRelay> relay;
    engine::EngineClient* engine;
    std::optional<engine::RequestKey> key;
    std::string id;
    std::string salt;
    bool ended = false;
    ~Guard() {
      relay->close();
      if (key && !ended) {
        engine->abort(*key);
        engine->release_cache(id, salt);
      }
    }
  } guard{std::make_shared<EventRelay>(conn.executor(), &signal),
          ctx.deps.engine,
          {},
          id,
          spec.cache_salt};
  Result<engine::RequestKey> key = ctx.deps.engine->submit(std::move(r), guard.relay->make_sink(0));
  if (!key.ok()) {
    ApiError e = ApiError::from_status(key.error());
    // OutOfRange here is the pin quota (the context length was checked above): 400, not 429.
    if (key.error().code() == StatusCode::kOutOfRange) e.code = "cache_quota_exceeded";
    co_return co_await conn.write_response(HttpResponse::error(e).with_headers(headers));
  }
  guard.key = *key;
  conn.watch_peer(&signal);
  std::optional<engine::TokenEvent> last;
  while (!last) {
    while (std::optional<EventRelay::Item> item = guard.relay->pop()) {
      if (item->event.finish) last = std::move(item->event);
    }
    if (last || conn.peer_closed()) break;
    co_await signal.wait();
  }
  guard.ended = last.has_value();
  co_await conn.unwatch_peer();
  if (!last) co_return false;  // the client went away: the guard aborts and unpins
  const engine::FinishReason reason = *last->finish;
  if (reason == engine::FinishReason::kAbort) {
    co_return co_await conn.write_response(
        HttpResponse::error(ApiError::unavailable("The cache request was cancelled."))
            .with_headers(headers));
  }
  if (reason == engine::FinishReason::kError) {
    co_return co_await conn.write_response(
        HttpResponse::error(ApiError::internal(last->error)).with_headers(headers));
  }
  // The engine pinned the cache before it sent the final event.
  const engine::ContextCacheInfo info =
      ctx.deps.engine->find_cache(id, spec.cache_salt).value_or(std::move(made));
  const std::string body = cache_object(info, description).dump();
  co_return co_await conn.write_response(HttpResponse::json(200, body).with_headers(headers));
}

}  // namespace keel::server
