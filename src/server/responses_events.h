// ResponseEvents: a Response's output items, built from the updates a generation streams (text,
// thinking, tool-call starts and argument fragments, the end), and — when the client streams —
// the Responses API's SSE events for them. Frames are "event: <type>\ndata: <json>\n\n"; every
// event carries `type` and `sequence_number` (0, 1, 2, ... over the whole stream); no [DONE].
// The order, as OpenAI sends it:
//   response.created, response.in_progress                                    (start)
//   per message: response.output_item.added, response.content_part.added,
//     response.output_text.delta..., response.output_text.done, response.content_part.done,
//     response.output_item.done
//   per function call: response.output_item.added, response.function_call_arguments.delta...,
//     response.function_call_arguments.done, response.output_item.done
//   per thinking: response.output_item.added, response.reasoning_text.delta...,
//     response.reasoning_text.done, response.output_item.done
//   response.completed | response.incomplete | response.failed                (end)
// A new kind of update closes the open item first; items are numbered by output_index in order.
// Item ids: "<prefix>_<key>_<output_index>" (msg, fc, rs).
//
// Thread safety: a value with one owner.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace keel::server {

using OrderedJson = nlohmann::ordered_json;

class ResponseEvents {
 public:
  // `key` names the items (the response's hex id); `emit`: produce the SSE text (else the
  // methods only build the output items and leave `out` alone).
  ResponseEvents(std::string key, bool emit) : key_(std::move(key)), emit_(emit) {}

  // response.created and response.in_progress for `response` (its status "in_progress").
  std::string start(const OrderedJson& response);
  void reasoning(std::string_view text, std::string* out);
  void text(std::string_view text, std::string* out);
  void call_start(std::string call_id, std::string name, std::string* out);
  void call_arguments(std::string_view fragment, std::string* out);
  // The output ended: closes the open item.
  void close(std::string* out);
  // The last event: response.<status> (completed, incomplete, failed) for `response`.
  std::string end(const OrderedJson& response);

  // The output items so far (an open item as it will be once closed).
  [[nodiscard]] const OrderedJson& output() const { return output_; }

 private:
  enum class Open { kNone, kReasoning, kMessage, kCall };
  // One SSE frame: `body` with type and sequence_number first.
  std::string event(std::string_view type, const OrderedJson& body);
  void open(Open kind, OrderedJson item, std::string* out);
  [[nodiscard]] std::string item_id(std::string_view prefix) const;
  [[nodiscard]] OrderedJson& current() { return output_.back(); }

  std::string key_;
  bool emit_;
  int64_t sequence_ = 0;
  Open open_ = Open::kNone;
  OrderedJson output_ = OrderedJson::array();
};

}  // namespace keel::server
