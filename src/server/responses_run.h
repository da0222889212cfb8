// ResponsePlan and ResponseRun: one /v1/responses generation. The route turns a request into a
// ResponsePlan — the Response's echoed fields, its input items and the chat GenerationSpec the
// whole conversation means (responses_routes.h); a ResponseRun then runs that spec through the
// chat path's GenerationChoices (stop strings, tool calls parsed by the model's ToolFormat,
// reasoning split, structured outputs), always in its streaming mode with a chunk observer, so
// streamed and stored outputs come from one code path: the observed updates feed a
// ResponseEvents, which builds the output items and, when the client streams, the events.
// It is a GenerationWork (generation_handler.h): the connection's driver runs a foreground
// response; the background runner (responses_background.h) drives one from a worker thread.
// It also keeps the token ids of the prompt and of the output, for the store.
//
// Storing: a foreground response with `store` is put in ctx.responses when it ends (completed,
// incomplete, or failed after its stream started); a background one is stored by its runner.
//
// Thread safety: one owner (the connection's strand or a background worker).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/generation_choices.h"
#include "server/generation_work.h"
#include "server/responses_events.h"
#include "server/responses_request.h"
#include "server/responses_store.h"

namespace keel::server {

struct ResponsePlan {
  std::string id;          // "resp_<key>"
  std::string key;         // hex: names the engine requests, tool call ids and item ids
  int64_t created_at = 0;  // Unix seconds
  std::string model;       // as reported (the served model name when the request named none)
  ResponsesRequest request;
  GenerationSpec spec;  // the chat spec of the whole conversation (stream: true)
};

// The Response object of `plan` with `status`, `output` and `usage` (null while unknown);
// `error` and `incomplete_details` null unless given.
OrderedJson response_object(const ResponsePlan& plan, ResponseStatus status,
                            const OrderedJson& output, const OrderedJson& usage,
                            const OrderedJson& error = nullptr,
                            const OrderedJson& incomplete_details = nullptr);

// The Responses usage object from the chat path's counts.
OrderedJson responses_usage(const Usage& usage);

// A failed response's `error` ({code, message}) for an ApiError.
OrderedJson response_error(const ApiError& error);

// Chat-path error parameters renamed to the Responses fields they came from (messages... → input,
// max_completion_tokens → max_output_tokens, response_format → text.format).
ApiError as_responses_error(ApiError error);

class ResponseRun final : public GenerationWork {
 public:
  // `prompts` from prepare_prompts(ctx, plan.spec) (one prompt). `ctx` must outlive the run.
  ResponseRun(ServerContext& ctx, ResponsePlan plan, std::vector<PreparedPrompt> prompts);

  [[nodiscard]] size_t num_choices() const override { return choices_.num_choices(); }
  [[nodiscard]] engine::GenerationRequest request(size_t choice) const override {
    return choices_.request(choice);
  }
  void placed(size_t choice, engine::RequestKey key) override { choices_.placed(choice, key); }
  void consume(size_t choice, engine::TokenEvent event, std::string* sse) override;
  void abort_unfinished() override { choices_.abort_unfinished(); }
  [[nodiscard]] bool all_done() const override { return choices_.all_done(); }
  [[nodiscard]] const std::optional<ApiError>& failure() const override {
    return choices_.failure();
  }
  [[nodiscard]] bool streaming() const override { return plan_.request.stream; }
  [[nodiscard]] const std::string& request_id() const override { return plan_.key; }
  std::string stream_head() override;
  std::string stream_tail() override;
  std::string final_body() override;
  std::string stream_error(const ApiError& error) override;

  // The output items and usage so far (a running background response's progress).
  [[nodiscard]] const OrderedJson& output() const { return events_.output(); }
  [[nodiscard]] OrderedJson usage() const { return responses_usage(choices_.usage()); }
  // After all_done(): the finished response (completed, or incomplete at max_output_tokens);
  // with `error`: failed.
  [[nodiscard]] StoredResponse result(const std::optional<ApiError>& error);

 private:
  void on_chunk(const ChunkChoice& c);
  // A foreground response with `store`: into ctx.responses (a failure is logged).
  void store(const StoredResponse& r);

  ServerContext& ctx_;
  ResponsePlan plan_;
  std::vector<int32_t> prompt_tokens_;
  std::vector<int32_t> output_tokens_;
  GenerationChoices choices_;
  ResponseEvents events_;
  std::string* sse_ = nullptr;  // where on_chunk appends events (during consume)
  std::optional<std::string> finish_reason_;
};

}  // namespace keel::server
