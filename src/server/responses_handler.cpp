// run_response (see responses_handler.h).
#include "server/responses_handler.h"

#include "server/generation_handler.h"
#include "server/prompt_preparation.h"

namespace keel::server {

net::awaitable<bool> run_response(HttpConnection& conn, ResponsePlan plan, HeaderList headers) {
  ServerContext& ctx = conn.context();
  const GenerationSpec& spec = plan.spec;
  PreparedPrompts prepared = co_await conn.on_tokenizer<PreparedPrompts>(
      [&ctx, &spec] { return prepare_prompts(ctx, spec); });
  if (prepared.error) {
    HttpResponse error = HttpResponse::error(as_responses_error(*prepared.error));
    co_return co_await conn.write_response(std::move(error).with_headers(headers));
  }
  ResponseRun run(ctx, std::move(plan), std::move(prepared.prompts));
  co_return co_await run_generation_work(conn, run, headers);
}

}  // namespace keel::server
