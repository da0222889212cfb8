// The KEEL_READY line: format/parse round trip, a total parser (every malformed line is
// InvalidArgument), the port accessor, and print_ready_line writing one whole line to fd 1.
#include "proc/ready_line.h"

#include <gtest/gtest.h>

namespace keel::proc {
namespace {

TEST(ReadyLineTest, FormatParseRoundTrip) {
  const nlohmann::json payload = {{"role", "te"}, {"port", 41234}, {"pid", 123}};
  const std::string line = format_ready_line(payload);
  EXPECT_TRUE(line.starts_with("KEEL_READY {"));
  EXPECT_EQ(line.find('\n'), std::string::npos);
  Result<nlohmann::json> parsed = parse_ready_line(line);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ(*parsed, payload);
  Result<int> port = ready_port(*parsed);
  ASSERT_TRUE(port.ok());
  EXPECT_EQ(*port, 41234);
}

TEST(ReadyLineTest, AcceptsTrailingNewlines) {
  for (const char* line : {"KEEL_READY {\"port\":1}\n", "KEEL_READY {\"port\":1}\r\n"}) {
    Result<nlohmann::json> parsed = parse_ready_line(line);
    ASSERT_TRUE(parsed.ok()) << line;
    EXPECT_EQ((*parsed)["port"], 1);
  }
}

TEST(ReadyLineTest, MalformedLinesAreInvalidArgument) {
  for (const char* line : {"", "KEEL_READY", "KEEL_READY ", "KEEL_READY {", "KEEL_READY [1,2]",
                           "KEEL_READY 42", "KEEL_READY {\"a\":1} trailing", "keel_ready {}",
                           "READY {}", "KEEL_READY {}\n{}", "KEEL_READY\t{}"}) {
    Result<nlohmann::json> parsed = parse_ready_line(line);
    ASSERT_FALSE(parsed.ok()) << line;
    EXPECT_EQ(parsed.error().code(), StatusCode::kInvalidArgument) << line;
  }
}

TEST(ReadyLineTest, ClaimsAreRecognized) {
  EXPECT_TRUE(is_ready_line("KEEL_READY {}"));
  EXPECT_TRUE(is_ready_line("KEEL_READY"));
  EXPECT_TRUE(is_ready_line("KEEL_READY garbage"));
  EXPECT_FALSE(is_ready_line("KEEL_READYX {}"));
  EXPECT_FALSE(is_ready_line("log: KEEL_READY {}"));
}

TEST(ReadyLineTest, PortMustBeAnIntegerInRange) {
  EXPECT_FALSE(ready_port(nlohmann::json::object()).ok());
  EXPECT_FALSE(ready_port({{"port", "80"}}).ok());
  EXPECT_FALSE(ready_port({{"port", 0}}).ok());
  EXPECT_FALSE(ready_port({{"port", 65536}}).ok());
  EXPECT_FALSE(ready_port({{"port", 1.5}}).ok());
  EXPECT_EQ(*ready_port({{"port", 65535}}), 65535);
}

TEST(ReadyLineTest, PrintWritesOneFlushedLine) {
  ::testing::internal::CaptureStdout();
  std::printf("before\n");  // buffered stdio output must come out first
  Status printed = print_ready_line({{"role", "gateway"}, {"port", 8080}});
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(printed.ok()) << printed.to_string();
  EXPECT_EQ(out, "before\nKEEL_READY {\"port\":8080,\"role\":\"gateway\"}\n");
  EXPECT_FALSE(print_ready_line(nlohmann::json::array()).ok());
}

}  // namespace
}  // namespace keel::proc
