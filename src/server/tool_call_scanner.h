// ToolCallScanner: reads one tool call's JSON object — {"name": N, "arguments" | "parameters": A,
// ...} — a character at a time, so a stream can send the call's name as soon as it is written
// and its arguments as they are generated. It tracks only what a call needs: the nesting depth,
// strings and their escapes, the top-level keys, the name's string and the arguments' text.
//
// The arguments' text is the value as the model wrote it with the whitespace outside strings
// dropped (so `{"a": 1}` reads `{"a":1}`); key order, numbers and escapes are kept. arguments()
// is the call's final arguments: that text for an object, the decoded string for a string value
// (`"arguments": "{\"a\": 1}"` → `{"a":1}`, whitespace dropped the same way), "{}" when absent
// or null. For an object value, the fragments
// take_fragment() hands out concatenate to arguments(); for other values they come at the end.
//
// The scanner does not validate JSON: a caller that needs a well-formed call checks the text it
// scanned (parse_tool_output does). failed() is set when the text is not an object at all.
// Thread safety: a value with one owner.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace keel::server {

class ToolCallScanner {
 public:
  // Consumes one character; false (not consumed) once the object has ended or the scan failed.
  bool push(char c);
  // Consumes a prefix of `text`; returns how many characters it took.
  size_t push(std::string_view text);

  [[nodiscard]] bool done() const { return done_; }      // the outer object closed
  [[nodiscard]] bool failed() const { return failed_; }  // not a JSON object
  // The function name, once its string has closed (decoded; nullopt if it is not a string).
  [[nodiscard]] const std::optional<std::string>& name() const { return name_; }
  // The arguments streamed so far and not yet taken: object text while it is written; the whole
  // (final) arguments at the end for other values. Empty when nothing new.
  std::string take_fragment();
  // The final arguments (after done()): see the file comment.
  [[nodiscard]] std::string arguments() const;

 private:
  enum class Phase { kStart, kKey, kColon, kValue, kInValue, kAfterValue };
  enum class Role { kOther, kName, kArgs };
  enum class ValueKind { kNone, kObject, kString, kOther };

  void start_value(char c);
  // A character of the current value; false when it ended the value without being part of it
  // (a primitive's terminator, to be read at the top level).
  bool in_value(char c);
  void end_value();
  void add(char c);  // to the value's text (and the arguments', when it is them)

  Phase phase_ = Phase::kStart;
  int depth_ = 0;  // nesting inside the current top-level value (0: at the object's own level)
  bool primitive_ = false;  // the value is a number, true, false or null
  bool in_string_ = false;
  bool escape_ = false;
  std::string key_;  // the top-level key being read (raw, between its quotes)
  Role role_ = Role::kOther;
  std::string value_;  // the current top-level value's text (whitespace outside strings dropped)
  std::optional<std::string> name_;
  ValueKind args_kind_ = ValueKind::kNone;
  std::string args_;          // the arguments value's text
  bool args_closed_ = false;  // the arguments value has ended
  size_t taken_ = 0;          // bytes of args_ handed out (object values)
  bool final_taken_ = false;  // other values: the final arguments were handed out
  bool done_ = false;
  bool failed_ = false;
};

}  // namespace keel::server
