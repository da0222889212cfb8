// Tool calls streamed as they are generated: ToolCallScanner (names, argument fragments and the
// final arguments of one call object) and ToolCallStream under a tool grammar (ToolRequest::
// constrained) for every family — content before a call streams as content; each call starts
// with {index, name, arguments ""} once its name is written, its arguments follow in several
// fragments whose concatenation equals parse_tool_output's arguments for the whole output.
#include <gtest/gtest.h>

#include "server/tool_call_parser.h"
#include "server/tool_call_scanner.h"
#include "server/tool_call_stream.h"

namespace keel::server {
namespace {

ToolRequest tools(bool parallel = true) {
  ToolRequest r;
  r.tools = {ToolDef{.name = "add"}, ToolDef{.name = "get_weather"}};
  r.choice = ToolChoice::kAuto;
  r.parallel = parallel;
  r.constrained = true;
  return r;
}

TEST(ToolCallScannerTest, NameAndArgumentsOfOneObject) {
  ToolCallScanner s;
  const std::string text =
      R"({"arguments": {"b": [1, {"x": "a} b"}], "a": "\"q\""}, "name": "add"} tail)";
  const size_t used = s.push(text);
  EXPECT_EQ(text.substr(used), " tail");
  ASSERT_TRUE(s.done());
  EXPECT_FALSE(s.failed());
  EXPECT_EQ(s.name().value_or(""), "add");
  EXPECT_EQ(s.arguments(), R"({"b":[1,{"x":"a} b"}],"a":"\"q\""})");  // order and strings kept

  ToolCallScanner str;
  str.push(R"({"name": "add", "parameters": "{\"a\": 1}", "id": 7})");
  ASSERT_TRUE(str.done());
  EXPECT_EQ(str.arguments(), R"({"a":1})");
  EXPECT_EQ(str.take_fragment(), R"({"a":1})");  // a string comes whole, at the end
  EXPECT_EQ(str.take_fragment(), "");

  for (const char* none : {R"({"name": "add"})", R"({"name": "add", "arguments": null})"}) {
    ToolCallScanner n;
    n.push(none);
    ASSERT_TRUE(n.done()) << none;
    EXPECT_EQ(n.arguments(), "{}") << none;
  }
  ToolCallScanner bad;
  EXPECT_EQ(bad.push("[1]"), 0u);
  EXPECT_TRUE(bad.failed());
  ToolCallScanner escaped;  // a name with escapes is decoded
  escaped.push(R"({"name": "a\u0062c"})");
  EXPECT_EQ(escaped.name().value_or(""), "abc");
}

TEST(ToolCallScannerTest, FragmentsConcatenateToTheArguments) {
  const std::string text = R"({"name": "get_weather", "arguments": {"city": "Paris", "n": 2}})";
  ToolCallScanner s;
  std::string joined;
  int fragments = 0;
  for (char c : text) {
    EXPECT_TRUE(s.push(c));
    std::string f = s.take_fragment();
    if (!f.empty()) ++fragments;
    joined += f;
    if (!s.name()) {
      EXPECT_EQ(joined, "");
    }
  }
  EXPECT_TRUE(s.done());
  EXPECT_EQ(joined, s.arguments());
  EXPECT_EQ(joined, R"({"city":"Paris","n":2})");
  EXPECT_GT(fragments, 5);
}

// Streams `text` in pieces of `step` bytes; returns all deltas and the content, checking the
// OpenAI shape on the way: a call's first delta is its start, later ones carry fragments only.
struct Streamed {
  std::string content;
  std::vector<ToolCallDelta> deltas;
  size_t num_calls = 0;
};
Streamed run(ToolFamily family, const ToolRequest& r, std::string_view text, size_t step) {
  ToolCallStream s(family, &r);
  Streamed out;
  auto take = [&out](ToolStreamOutput o) {
    out.content += o.content;
    for (ToolCallDelta& d : o.deltas) out.deltas.push_back(std::move(d));
  };
  for (size_t i = 0; i < text.size(); i += step) take(s.push(text.substr(i, step)));
  take(s.finish());
  out.num_calls = s.num_calls();
  return out;
}

// Checks the stream of `text` against the complete parse, for several chunk sizes.
void expect_streams_like_parse(ToolFamily family, const ToolRequest& r, const std::string& text,
                               const std::string& content_before) {
  const ParsedToolOutput whole = parse_tool_output(family, text, r);
  ASSERT_FALSE(whole.calls.empty()) << text;
  for (size_t step : {1, 2, 5, 1000}) {
    const Streamed s = run(family, r, text, step);
    const std::string what =
        std::string(tool_family_name(family)) + " step " + std::to_string(step) + ": " + text;
    EXPECT_EQ(s.num_calls, whole.calls.size()) << what;
    std::vector<std::string> args(whole.calls.size());
    std::vector<int> fragments(whole.calls.size(), 0);
    for (const ToolCallDelta& d : s.deltas) {
      ASSERT_LT(d.index, whole.calls.size()) << what;
      if (d.start) {
        EXPECT_EQ(d.name, whole.calls[d.index].name) << what;
        EXPECT_EQ(fragments[d.index], 0) << what;  // the start comes first
        EXPECT_EQ(d.arguments, "");
        fragments[d.index] = -1;
      } else {
        EXPECT_NE(fragments[d.index], 0) << what;  // after the start
        fragments[d.index] = fragments[d.index] < 0 ? 1 : fragments[d.index] + 1;
        args[d.index] += d.arguments;
      }
    }
    for (size_t i = 0; i < whole.calls.size(); ++i) {
      EXPECT_EQ(args[i], whole.calls[i].arguments) << what;
      if (step == 1) {
        EXPECT_GT(fragments[i], 3) << what;  // streamed, not sent whole
      }
    }
    EXPECT_EQ(s.content, content_before + whole.content.substr(std::min(whole.content.size(),
                                                                        content_before.size())))
        << what;
  }
}

TEST(ToolCallStreamTest, EveryFamilyStreamsArgumentsAsGenerated) {
  const ToolRequest r = tools();
  expect_streams_like_parse(
      ToolFamily::kHermes, r,
      "Let me see. <tool<x> <tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": "
      "{\"a\": 1, \"b\": 22}}\n</tool_call>",
      "Let me see. <tool<x> ");
  expect_streams_like_parse(ToolFamily::kGeneric, r,
                            "{\"name\": \"add\", \"arguments\": {\"a\": 10, \"b\": 2}}", "");
  expect_streams_like_parse(ToolFamily::kGeneric, r,
                            " [{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}, "
                            "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]",
                            "");
  expect_streams_like_parse(ToolFamily::kLlama3, r,
                            "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}", "");
  expect_streams_like_parse(ToolFamily::kMistral, r,
                            "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]",
                            "");
}

TEST(ToolCallStreamTest, ContentStreamsAndOddCallsEndWhole) {
  const ToolRequest r = tools();
  // Plain text in a JSON family streams at once; so does Hermes text without a block.
  Streamed s = run(ToolFamily::kGeneric, r, "  Hello {x}", 3);
  EXPECT_EQ(s.content, "  Hello {x}");
  EXPECT_TRUE(s.deltas.empty());
  s = run(ToolFamily::kHermes, r, "No <tool_cal call.", 1);
  EXPECT_EQ(s.content, "No <tool_cal call.");
  EXPECT_EQ(s.num_calls, 0u);
  // Arguments as a JSON string or absent: sent whole when the call ends.
  s = run(ToolFamily::kGeneric, r, R"({"name": "add", "arguments": "{\"a\": 1}"})", 1);
  ASSERT_EQ(s.deltas.size(), 2u);
  EXPECT_TRUE(s.deltas[0].start);
  EXPECT_EQ(s.deltas[1].arguments, R"({"a":1})");
  s = run(ToolFamily::kHermes, r, "<tool_call>{\"name\": \"add\"}</tool_call>\nbye ", 2);
  ASSERT_EQ(s.deltas.size(), 2u);
  EXPECT_EQ(s.deltas[1].arguments, "{}");
  EXPECT_EQ(s.content, "bye");  // text after the calls: held, trimmed
  // parallel_tool_calls false: the second call is not sent.
  const ToolRequest single = tools(false);
  s = run(ToolFamily::kGeneric, single,
          "[{\"name\": \"add\", \"arguments\": {}}, {\"name\": \"add\", \"arguments\": {}}]", 1);
  EXPECT_EQ(s.num_calls, 1u);
  for (const ToolCallDelta& d : s.deltas) EXPECT_EQ(d.index, 0u);
  // Unconstrained (a user grammar shapes the output): a call is held and sent whole at the end.
  ToolRequest free = tools();
  free.constrained = false;
  s = run(ToolFamily::kGeneric, free, "{\"name\": \"add\", \"arguments\": {\"a\": 1}}", 1);
  ASSERT_EQ(s.deltas.size(), 2u);
  EXPECT_EQ(s.deltas[1].arguments, R"({"a":1})");
  s = run(ToolFamily::kGeneric, free, "{\"answer\": 42}", 1);
  EXPECT_EQ(s.content, "{\"answer\": 42}");
  EXPECT_EQ(s.num_calls, 0u);
}

}  // namespace
}  // namespace keel::server
