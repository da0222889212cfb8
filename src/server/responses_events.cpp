// ResponseEvents (see responses_events.h).
#include "server/responses_events.h"

#include <fmt/format.h>

#include "server/responses_items.h"

namespace keel::server {
namespace {

OrderedJson output_text_part(std::string text) {
  return {{"type", "output_text"},
          {"text", std::move(text)},
          {"annotations", OrderedJson::array()},
          {"logprobs", OrderedJson::array()}};
}

}  // namespace

std::string ResponseEvents::event(std::string_view type, const OrderedJson& body) {
  OrderedJson j = {{"type", std::string(type)}, {"sequence_number", sequence_++}};
  for (const auto& [k, v] : body.items()) j[k] = v;
  return fmt::format("event: {}\ndata: {}\n\n", type, dump_ordered_json(j));
}

std::string ResponseEvents::item_id(std::string_view prefix) const {
  return fmt::format("{}_{}_{}", prefix, key_, output_.size());
}

std::string ResponseEvents::start(const OrderedJson& response) {
  if (!emit_) return {};
  std::string out = event("response.created", {{"response", response}});
  out += event("response.in_progress", {{"response", response}});
  return out;
}

void ResponseEvents::open(Open kind, OrderedJson item, std::string* out) {
  close(out);
  open_ = kind;
  output_.push_back(std::move(item));
  if (!emit_) return;
  const size_t index = output_.size() - 1;
  OrderedJson added = current();
  added["status"] = "in_progress";
  if (kind == Open::kMessage) added["content"] = OrderedJson::array();
  if (kind == Open::kReasoning) added["content"] = OrderedJson::array();
  *out += event("response.output_item.added", {{"output_index", index}, {"item", added}});
  if (kind == Open::kMessage) {
    *out += event("response.content_part.added", {{"item_id", current()["id"]},
                                                  {"output_index", index},
                                                  {"content_index", 0},
                                                  {"part", output_text_part("")}});
  }
}

void ResponseEvents::reasoning(std::string_view text, std::string* out) {
  if (text.empty()) return;
  if (open_ != Open::kReasoning) open(Open::kReasoning, reasoning_item(item_id("rs"), ""), out);
  OrderedJson& content = current()["content"];
  if (content.empty()) content.push_back({{"type", "reasoning_text"}, {"text", ""}});
  content[0]["text"] = content[0]["text"].get<std::string>() + std::string(text);
  if (!emit_) return;
  *out += event("response.reasoning_text.delta", {{"item_id", current()["id"]},
                                                  {"output_index", output_.size() - 1},
                                                  {"content_index", 0},
                                                  {"delta", std::string(text)}});
}

void ResponseEvents::text(std::string_view text, std::string* out) {
  if (text.empty()) return;
  if (open_ != Open::kMessage) open(Open::kMessage, message_output_item(item_id("msg"), ""), out);
  OrderedJson& part = current()["content"][0];
  part["text"] = part["text"].get<std::string>() + std::string(text);
  if (!emit_) return;
  *out += event("response.output_text.delta", {{"item_id", current()["id"]},
                                               {"output_index", output_.size() - 1},
                                               {"content_index", 0},
                                               {"delta", std::string(text)},
                                               {"logprobs", OrderedJson::array()}});
}

void ResponseEvents::call_start(std::string call_id, std::string name, std::string* out) {
  open(Open::kCall, function_call_item(item_id("fc"), std::move(call_id), std::move(name), ""),
       out);
}

void ResponseEvents::call_arguments(std::string_view fragment, std::string* out) {
  if (open_ != Open::kCall || fragment.empty()) return;
  OrderedJson& args = current()["arguments"];
  args = args.get<std::string>() + std::string(fragment);
  if (!emit_) return;
  *out += event("response.function_call_arguments.delta", {{"item_id", current()["id"]},
                                                           {"output_index", output_.size() - 1},
                                                           {"delta", std::string(fragment)}});
}

void ResponseEvents::close(std::string* out) {
  const Open was = open_;
  open_ = Open::kNone;
  if (was == Open::kNone || !emit_) return;
  const OrderedJson& item = current();
  const size_t index = output_.size() - 1;
  const OrderedJson& id = item["id"];
  switch (was) {
    case Open::kMessage: {
      const OrderedJson& part = item["content"][0];
      *out += event("response.output_text.done", {{"item_id", id},
                                                  {"output_index", index},
                                                  {"content_index", 0},
                                                  {"text", part["text"]},
                                                  {"logprobs", OrderedJson::array()}});
      *out +=
          event("response.content_part.done",
                {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"part", part}});
      break;
    }
    case Open::kCall:
      *out += event("response.function_call_arguments.done", {{"item_id", id},
                                                              {"output_index", index},
                                                              {"name", item["name"]},
                                                              {"arguments", item["arguments"]}});
      break;
    case Open::kReasoning:
      if (!item["content"].empty()) {
        *out += event("response.reasoning_text.done", {{"item_id", id},
                                                       {"output_index", index},
                                                       {"content_index", 0},
                                                       {"text", item["content"][0]["text"]}});
      }
      break;
    case Open::kNone:
      break;
  }
  *out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
}

std::string ResponseEvents::end(const OrderedJson& response) {
  if (!emit_) return {};
  const std::string status = response.value("status", "completed");
  return event("response." + status, {{"response", response}});
}

}  // namespace keel::server
