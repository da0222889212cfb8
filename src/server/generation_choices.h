// GenerationChoices: the transport-free core of one generation request — its prompts × n choices,
// the engine requests made for them (seed + i), the events consumed into each choice's
// ChoiceOutput, usage, and the final non-streamed body or the SSE deltas. The HTTP handler
// (generation_handler.cpp) drives it from a connection's strand; the batch runner
// (batch_runner.cpp) from a batch worker thread. Both route events to consume() themselves.
// With tools (tool_choice not "none") the output is parsed into calls (parse_tool_output; streamed:
// a ToolCallStream, calls sent as they are generated when a tool grammar constrains the output):
// message.tool_calls / tool-call deltas and finish_reason "tool_calls"; the engine keeps the KV of
// a choice that ends in a call for the next turn (keep_kv; released here when it did not). With a
// reasoning parser (ServerDeps::reasoning_parser) a chat choice's text is first split into
// thinking and content (reasoning_split.h; streamed: a ReasoningSplitter per choice): the
// thinking goes out as reasoning_content / reasoning, tool calls are parsed from the content only,
// and a tool grammar lets the thinking come first (with_reasoning_prefix). A request whose output
// another grammar shapes from its first token (response_format, `grammar`, `regex`) is not split.
//
// Invariant: every engine request submitted is finished or aborted once abort_unfinished() has
// run; callers run it on every exit path (the destructor does not: the engine may be gone).
//
// Thread safety: one owner thread (or strand); the sinks it hands the engine are the caller's.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/choice_output.h"
#include "server/generation_request.h"
#include "server/prompt_preparation.h"
#include "server/reasoning_split.h"
#include "server/response_builder.h"
#include "server/server_context.h"
#include "server/tool_call_stream.h"

namespace keel::server {

class GenerationChoices {
 public:
  // `request_id` names the engine requests ("<id>-<choice>") and the response ("chatcmpl-<id>").
  GenerationChoices(const ServerContext& ctx, GenerationSpec spec,
                    std::vector<PreparedPrompt> prompts, std::string request_id);

  // The sink the engine delivers choice `choice`'s events to.
  using SinkFactory = std::function<std::shared_ptr<engine::OutputSink>(size_t choice)>;
  // Submits every choice; on the first refusal returns its error (earlier ones stay submitted:
  // the caller aborts them with abort_unfinished()).
  std::optional<ApiError> submit_all(const SinkFactory& make_sink);
  // Or, for a caller that submits them itself (EngineClient::submit_async): choice `choice`'s
  // engine request, and placed() once the engine took it as `key`.
  [[nodiscard]] size_t num_choices() const { return slots_.size(); }
  [[nodiscard]] engine::GenerationRequest request(size_t choice) const {
    return make_request(slots_[choice]);
  }
  void placed(size_t choice, engine::RequestKey key);
  // One engine event of `choice`. When streaming, appends the SSE events it produces to `sse`.
  void consume(size_t choice, engine::TokenEvent event, std::string* sse);
  // Aborts every submitted, unfinished engine request. Idempotent.
  void abort_unfinished();
  // Streamed updates go to `observer` instead of becoming chat SSE chunks (the Responses API
  // turns them into its own events: responses_events.h); consume() then appends nothing.
  using ChunkObserver = std::function<void(const ChunkChoice&)>;
  void set_chunk_observer(ChunkObserver observer) { observer_ = std::move(observer); }

  [[nodiscard]] bool all_done() const { return num_done_ == slots_.size(); }
  // The first choice error (engine error or abort), if any.
  [[nodiscard]] const std::optional<ApiError>& failure() const { return failure_; }
  [[nodiscard]] const GenerationSpec& spec() const { return spec_; }
  [[nodiscard]] const std::string& request_id() const { return request_id_; }
  [[nodiscard]] Usage usage() const;
  // The JSON body of the non-streamed 200 response (after all_done()).
  [[nodiscard]] std::string final_body() const;
  // The SSE tail of a successful stream: the usage event (when asked for) and [DONE].
  [[nodiscard]] std::string stream_tail() const;

 private:
  struct Slot {
    size_t prompt = 0;
    int32_t index = 0;  // choice index in the response: prompt * n + i
    engine::RequestKey key = 0;
    bool submitted = false;
    bool done = false;        // finished, or aborted by us
    bool sent_first = false;  // chat: role chunk sent; completions: echo text sent
    std::unique_ptr<ChoiceOutput> out;
    std::unique_ptr<ToolCallStream> tools;  // streamed chat with tools: holds back calls
    // Streamed chat with a reasoning parser: splits the thinking from the content.
    std::unique_ptr<ReasoningSplitter> reasoning;
  };
  // Whether the output of `slot` starts inside the thinking (reasoning_ only).
  [[nodiscard]] bool starts_in_reasoning(const Slot& slot) const;
  engine::GenerationRequest make_request(const Slot& slot) const;
  // KV kept across tool calls (engine::GenerationRequest::keep_kv): interactive chat with tools
  // (tool_choice not "none") asks the engine to pin; whether `slot`'s finished output was a call.
  [[nodiscard]] bool keeps_kv() const;
  [[nodiscard]] bool ended_in_tool_call(const Slot& slot) const;
  void stream_delta(Slot& slot, ChoiceDelta& delta, std::string* out) const;
  // A ToolCallStream's content and deltas as SSE chunks of choice `slot`.
  void stream_tool_output(const Slot& slot, ToolStreamOutput o, std::string* out) const;
  // The choice's calls with their ids (tool_format.h).
  void name_calls(int32_t choice, std::vector<ToolCall>* calls) const;
  // One streamed update: to the observer, or as a chat SSE chunk appended to `out`.
  void emit(const ChunkChoice& c, std::string* out) const;

  engine::EngineClient* engine_;
  GenerationSpec spec_;
  std::vector<PreparedPrompt> prompts_;
  std::string request_id_;
  ResponseMeta meta_;
  ToolFamily tool_family_ = ToolFamily::kGeneric;
  ReasoningParser reasoning_parser_ = ReasoningParser::kNone;
  // Chat output is split into thinking and content (a parser, and no grammar but tools').
  bool reasoning_ = false;
  std::string lora_;  // the engine adapter `model` selects ("" = the base model)
  std::vector<Slot> slots_;
  size_t num_done_ = 0;
  std::optional<ApiError> failure_;
  ChunkObserver observer_;
};

}  // namespace keel::server
