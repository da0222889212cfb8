// ProgressReporter (host/progress_reporter.h) into a file, which is not a terminal: one line per
// decile however many updates come, nothing when disabled, after finish() or for a total of 0;
// amounts in binary units for bytes.
#include "host/progress_reporter.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace keel::host {
namespace {

// Everything written to `f` so far.
std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int c = std::fgetc(f); c != EOF; c = std::fgetc(f)) s.push_back(static_cast<char>(c));
  return s;
}

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n' ? 1 : 0;
  return n;
}

TEST(ProgressReporterTest, PrintsOneLinePerDecile) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressReporter p("writing x", "", true, f);
    for (uint64_t done = 0; done <= 1000; ++done) p.update(done, 1000);
  }
  const std::string out = contents(f);
  std::fclose(f);
  EXPECT_EQ(count_lines(out), 11) << out;  // 0 %, 10 %, ..., 100 %
  EXPECT_EQ(out.rfind("writing x: 0% (0 / 1000)\n", 0), 0u) << out;
  EXPECT_NE(out.find("writing x: 50% (500 / 1000)\n"), std::string::npos) << out;
  EXPECT_NE(out.find("writing x: 100% (1000 / 1000)\n"), std::string::npos) << out;
}

TEST(ProgressReporterTest, SilentWhenDisabledFinishedOrEmpty) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressReporter off("off", "B", false, f);
    off.update(5, 10);
    ProgressReporter empty("empty", "B", true, f);
    empty.update(0, 0);
    ProgressReporter done("done", "B", true, f);
    done.finish();
    done.update(10, 10);
  }
  EXPECT_EQ(contents(f), "");
  std::fclose(f);
}

TEST(ProgressReporterTest, BytesInBinaryUnits) {
  EXPECT_EQ(human_amount(512, "B"), "512.0 B");
  EXPECT_EQ(human_amount(1536, "B"), "1.5 KiB");
  EXPECT_EQ(human_amount(uint64_t{3} << 30, "B"), "3.0 GiB");
  EXPECT_EQ(human_amount(uint64_t{2} << 50, "B"), "2048.0 TiB");
  EXPECT_EQ(human_amount(1536, ""), "1536");
}

}  // namespace
}  // namespace keel::host
