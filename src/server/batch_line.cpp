// LineInbox and run_batch_line (see batch_line.h).
#include "server/batch_line.h"

#include <fmt/format.h>

#include "server/generation_choices.h"
#include "server/json_fields.h"
#include "server/prompt_preparation.h"
#include "server/response_builder.h"
#include "server/router.h"

namespace keel::server {

class LineInbox::Sink final : public engine::OutputSink {
 public:
  Sink(std::shared_ptr<LineInbox> inbox, size_t choice)
      : inbox_(std::move(inbox)), choice_(choice) {}
  void on_event(engine::TokenEvent event) override { inbox_->deliver(choice_, std::move(event)); }

 private:
  std::shared_ptr<LineInbox> inbox_;
  size_t choice_;
};

std::shared_ptr<engine::OutputSink> LineInbox::make_sink(size_t choice) {
  return std::make_shared<Sink>(shared_from_this(), choice);
}

void LineInbox::deliver(size_t choice, engine::TokenEvent event) {
  {
    MutexLock lock(mu_);
    if (closed_) return;
    queue_.push_back(Item{choice, std::move(event)});
  }
  cv_.notify_all();
}

void LineInbox::cancel() {
  {
    MutexLock lock(mu_);
    cancelled_ = true;
  }
  cv_.notify_all();
}

void LineInbox::close() {
  MutexLock lock(mu_);
  closed_ = true;
  queue_.clear();
}

bool LineInbox::wait(Clock::time_point deadline, std::deque<Item>* out) {
  UniqueLock lock(mu_);
  cv_.wait_until(lock.native(), deadline, [this] {
    mu_.assert_held();  // a wait's predicate runs under its lock
    return cancelled_ || !queue_.empty();
  });
  if (cancelled_) return false;
  while (!queue_.empty()) {
    out->push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return true;
}

std::string batch_output_line(std::string_view request_id, std::string_view custom_id,
                              int status_code, std::string_view body) {
  // The body is already JSON text: spliced in, not parsed again.
  return fmt::format(
      R"({{"id":{},"custom_id":{},"response":{{"status_code":{},"request_id":{},"body":{}}},)"
      R"("error":null}})",
      dump_json(fmt::format("batch_req_{}", request_id)), dump_json(std::string(custom_id)),
      status_code, dump_json(std::string(request_id)), body);
}

namespace {

BatchLineResult failed(std::string_view request_id, const BatchLine& line, const ApiError& e) {
  return {BatchLineResult::Kind::kFailed,
          batch_output_line(request_id, line.custom_id, e.status, e.body())};
}

// Aborts the line's unfinished engine requests and stops its inbox on every exit.
struct LineGuard {
  GenerationChoices* choices;
  LineInbox* inbox;
  ~LineGuard() {
    inbox->close();
    choices->abort_unfinished();
  }
};

// Submits the line's requests and waits for them; the line's result.
BatchLineResult run_choices(ServerContext& ctx, const BatchLine& line, GenerationChoices& choices,
                            const std::shared_ptr<LineInbox>& inbox) {
  const std::string& request_id = choices.request_id();
  LineGuard guard{&choices, inbox.get()};
  if (std::optional<ApiError> e =
          choices.submit_all([&inbox](size_t choice) { return inbox->make_sink(choice); })) {
    return failed(request_id, line, *e);
  }
  const int64_t timeout_ms = ctx.config.request_timeout_ms;
  const auto deadline = timeout_ms > 0
                            ? LineInbox::Clock::now() + std::chrono::milliseconds(timeout_ms)
                            : LineInbox::Clock::now() + std::chrono::hours(24 * 365);
  std::deque<LineInbox::Item> events;
  while (!choices.all_done() && !choices.failure()) {
    if (!inbox->wait(deadline, &events)) return {BatchLineResult::Kind::kCancelled, {}};
    if (events.empty() && LineInbox::Clock::now() >= deadline) {
      return failed(
          request_id, line,
          ApiError::timeout(fmt::format("The request did not finish within {} ms.", timeout_ms)));
    }
    for (LineInbox::Item& item : events) {
      choices.consume(item.choice, std::move(item.event), nullptr);
    }
    events.clear();
  }
  if (choices.failure()) return failed(request_id, line, *choices.failure());
  return {BatchLineResult::Kind::kCompleted,
          batch_output_line(request_id, line.custom_id, 200, choices.final_body())};
}

}  // namespace

BatchLineResult run_batch_line(ServerContext& ctx, ApiKind kind, const BatchLine& line,
                               const std::shared_ptr<LineInbox>& inbox) {
  const std::string request_id = ctx.ids.next();
  ApiResult<Json> parsed = parse_json_text(line.text);
  if (!parsed.ok()) return failed(request_id, line, parsed.error());  // validated already
  const Json& body = parsed.value()["body"];
  if (const Json* stream = field(body, "stream"); stream != nullptr && *stream == true) {
    return failed(request_id, line,
                  ApiError::bad_request("Streaming is not supported in a batch; remove `stream` "
                                        "or set it to false.",
                                        "stream"));
  }
  ApiResult<GenerationSpec> spec = generation_spec_for(ctx, body, kind, {line.text, "body"});
  if (!spec.ok()) return failed(request_id, line, spec.error());
  spec.value().work_class = engine::WorkClass::kBatch;  // let in after interactive work
  PreparedPrompts prepared = prepare_prompts(ctx, spec.value());
  if (prepared.error) return failed(request_id, line, *prepared.error);
  GenerationChoices choices(ctx, std::move(spec.value()), std::move(prepared.prompts), request_id);
  return run_choices(ctx, line, choices, inbox);
}

}  // namespace keel::server
