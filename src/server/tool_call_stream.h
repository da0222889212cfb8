// ToolCallStream: a streamed chat choice's output with tools → content to send now and OpenAI's
// tool-call deltas. Content streams live until a call may be starting (Hermes: `<tool_call>`, a
// partial marker at a chunk's end held until decided; JSON families: the output's first
// non-space character is `{` or `[`, or `<` for a textual <|python_tag|>).
//
// Two ways to send a call (ToolRequest::constrained decides):
//   - constrained (a tool grammar shapes the output, so a call that starts is well formed): each
//     call is sent as it is generated — a start delta {index, name} once its name is written,
//     then its arguments in fragments as the model writes them (ToolCallScanner); the fragments
//     of a call concatenate to its final arguments, which equal parse_tool_output's for the whole
//     output. Text after the calls (Hermes) is held and sent as content at the end, trimmed.
//   - unconstrained: from where a call may start, the rest is held and parsed at the end
//     (parse_tool_output); each call is then sent as a start delta and one arguments fragment.
// A JSON-family output that opens with `<` is held to the end in either way.
// With parallel_tool_calls false only the first call is sent.
// Thread safety: a value with one owner.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/tool_call_parser.h"
#include "server/tool_call_scanner.h"
#include "server/tool_format.h"
#include "server/tool_request.h"

namespace keel::server {

// One tool-call delta: a call's start (its name; the caller adds the id) or a fragment of its
// arguments.
struct ToolCallDelta {
  size_t index = 0;  // the call's index in the choice
  bool start = false;
  std::string name;       // start only
  std::string arguments;  // a fragment (start: "")
  friend bool operator==(const ToolCallDelta&, const ToolCallDelta&) = default;
};

// What a push or the finish releases: content first, then the deltas.
struct ToolStreamOutput {
  std::string content;
  std::vector<ToolCallDelta> deltas;
};

class ToolCallStream {
 public:
  // `request` must outlive the stream.
  ToolCallStream(ToolFamily family, const ToolRequest* request);

  // More output.
  ToolStreamOutput push(std::string_view text);
  // At the end of the output: what is left.
  ToolStreamOutput finish();
  // Calls sent so far (after finish: in all; > 0 means finish_reason "tool_calls").
  [[nodiscard]] size_t num_calls() const { return num_calls_; }

 private:
  enum class State {
    kText,       // content, streamed live, until a call may start
    kPlain,      // JSON families: the output is not a call; all of it streams live
    kHeld,       // held to the end, parsed then (unconstrained, or a JSON output opening with <)
    kCall,       // inside a call object (scanner_)
    kAfterCall,  // Hermes: after a call's object, until </tool_call>
    kBetween,    // Hermes: after a block; text is held content until the next <tool_call>
    kArray,      // JSON families: in a call array, before an element or the closing ]
    kTrailing,   // after the calls: held content
  };
  void on_text(ToolStreamOutput* out);
  void on_call(ToolStreamOutput* out);
  void on_after_call();
  void on_between();
  void on_array();
  void start_call();
  // Deltas the current call's scanner allows: its start once named, then new fragments.
  void emit_call_deltas(ToolStreamOutput* out);
  void emit_parsed(ParsedToolOutput parsed, ToolStreamOutput* out);

  ToolFamily family_;
  const ToolRequest* request_;
  State state_ = State::kText;
  std::string held_;      // output not yet consumed by the state machine
  std::string trailing_;  // content held for the end (text after calls)
  ToolCallScanner scanner_;
  bool call_started_ = false;  // the current call's start delta was sent
  bool call_skipped_ = false;  // the current call is not sent (parallel_tool_calls false)
  bool in_array_ = false;      // JSON families: the calls are an array's elements
  size_t num_calls_ = 0;
};

}  // namespace keel::server
