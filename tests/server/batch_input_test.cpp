// parse_batch_input: valid files (blank lines skipped, line numbers kept), every line-level error
// code with its line, duplicates, the request cap, empty files.
#include <gtest/gtest.h>

#include "server/batch_input.h"

namespace keel::server {
namespace {

constexpr std::string_view kChat = "/v1/chat/completions";

TEST(BatchInputTest, ValidLinesKeepTheirNumbers) {
  const std::string content =
      R"({"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{}})"
      "\n\n"
      R"({"custom_id":"b","method":"POST","url":"/v1/chat/completions","body":{"x":1}})";
  BatchInput in = parse_batch_input(content, kChat, 10);
  ASSERT_TRUE(in.errors.empty());
  ASSERT_EQ(in.lines.size(), 2u);
  EXPECT_EQ(in.lines[0].custom_id, "a");
  EXPECT_EQ(in.lines[0].line, 1);
  EXPECT_EQ(in.lines[1].custom_id, "b");
  EXPECT_EQ(in.lines[1].line, 3);
  EXPECT_TRUE(in.lines[1].text.starts_with("{\"custom_id\":\"b\""));
}

TEST(BatchInputTest, LineErrors) {
  const std::string content =
      "[1]\n"
      R"({"method":"POST","url":"/v1/chat/completions","body":{}})"
      "\n"
      R"({"custom_id":5,"method":"POST","url":"/v1/chat/completions","body":{}})"
      "\n"
      R"({"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{}})"
      "\n"
      R"({"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":"x"})"
      "\n"
      R"({"custom_id":"a","method":"PUT","url":"/v1/chat/completions","body":{}})"
      "\n";
  BatchInput in = parse_batch_input(content, kChat, 10);
  EXPECT_TRUE(in.lines.empty());
  std::vector<std::pair<std::string, int64_t>> got;
  for (const BatchError& e : in.errors) got.emplace_back(e.code, e.line.value_or(0));
  const std::vector<std::pair<std::string, int64_t>> want = {
      {"invalid_json_line", 1}, {"missing_required_parameter", 2}, {"invalid_custom_id", 3},
      {"invalid_url", 4},       {"missing_required_parameter", 5}, {"invalid_method", 6}};
  EXPECT_EQ(got, want);
}

TEST(BatchInputTest, DuplicatesCapAndEmpty) {
  const std::string line =
      R"({"custom_id":"same","method":"POST","url":"/v1/chat/completions","body":{}})";
  BatchInput dup = parse_batch_input(line + "\n" + line + "\n", kChat, 10);
  ASSERT_EQ(dup.errors.size(), 1u);
  EXPECT_EQ(dup.errors[0].code, "duplicate_custom_id");
  EXPECT_EQ(dup.errors[0].line, 2);
  EXPECT_TRUE(dup.lines.empty());
  BatchInput cap = parse_batch_input(line + "\n" + line + "\n", kChat, 1);
  ASSERT_FALSE(cap.errors.empty());
  EXPECT_EQ(cap.errors[0].code, "too_many_tasks");
  BatchInput empty = parse_batch_input(" \n\r\n", kChat, 10);
  ASSERT_EQ(empty.errors.size(), 1u);
  EXPECT_EQ(empty.errors[0].code, "empty_file");
}

}  // namespace
}  // namespace keel::server
