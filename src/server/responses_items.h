// The items of OpenAI's Responses API and their mapping to and from chat messages.
//
// Input items (normalize_input_items), each given an `id` when it has none:
//   - a string input → one user message;
//   - {type?: "message", role: user|system|developer|assistant, content} — content a string or an
//     array of input_text / output_text parts ({type, text}); other part types (input_image,
//     input_file, ...) are a 400. Normalized to {id, type: "message", role, status: "completed",
//     content: [{type: "input_text" | "output_text", text}]} (output_text for assistant);
//   - {type: "function_call", call_id, name, arguments (JSON text)} → kept;
//   - {type: "function_call_output", call_id, output: string | text parts} → kept;
//   - {type: "reasoning", ...} → kept (its text goes to the next assistant turn as its thinking);
//   - anything else (item_reference, a built-in tool's items) is a 400 naming the type.
// Items → chat messages (chat_messages): instructions first as a system message; a message item
// becomes a message of its role (text parts joined with "\n", as the chat path joins them);
// function_call items join the assistant message just before them (or start one) as its
// tool_calls [{id: call_id, type: "function", function: {name, arguments}}]; a
// function_call_output becomes a tool message {tool_call_id: call_id, content: output}.
// Output items (what a turn adds): a message {id, type: "message", status: "completed",
// role: "assistant", content: [{type: "output_text", text, annotations: [], logprobs: []}]},
// function_call {id, type: "function_call", status: "completed", call_id, name, arguments} and
// reasoning {id, type: "reasoning", summary: [], content: [{type: "reasoning_text", text}]}.
//
// Thread safety: pure functions.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace keel::server {

using OrderedJson = nlohmann::ordered_json;

// `input` (param "input") → the normalized item array. `new_id(prefix)` names items without one.
ApiResult<OrderedJson> normalize_input_items(
    const OrderedJson& input, const std::function<std::string(std::string_view prefix)>& new_id);

// The chat `messages` array for `items` (normalized), after `instructions` when given. A
// function_call_output whose call is not in `items` is still sent (the template decides).
ApiResult<OrderedJson> chat_messages(const std::optional<std::string>& instructions,
                                     const OrderedJson& items);

// Output items.
OrderedJson message_output_item(std::string id, std::string text);
OrderedJson function_call_item(std::string id, std::string call_id, std::string name,
                               std::string arguments);
OrderedJson reasoning_item(std::string id, std::string text);

// Compact JSON text of Responses objects; invalid UTF-8 is replaced, never thrown on.
std::string dump_ordered_json(const OrderedJson& j);

// The concatenated output_text of a Response's output items (the SDKs' `output_text`).
std::string output_text(const OrderedJson& output);

}  // namespace keel::server
