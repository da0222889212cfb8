// OutputTail (proc/output_tail.h): keeps only the newest `capacity` lines, tagged with the child's
// name, in order; echoes each line when asked (and then print() adds nothing); safe to feed from
// several threads at once.
#include "proc/output_tail.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace keel::proc {
namespace {

std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int c = std::fgetc(f); c != EOF; c = std::fgetc(f)) s.push_back(static_cast<char>(c));
  return s;
}

TEST(OutputTailTest, KeepsTheNewestLinesInOrder) {
  OutputTail tail(false, 3);
  for (int i = 0; i < 5; ++i) tail.add(i % 2 == 0 ? "te-0" : "je-0", "line " + std::to_string(i));
  EXPECT_EQ(tail.lines(),
            (std::vector<std::string>{"[te-0] line 2", "[je-0] line 3", "[te-0] line 4"}));
}

TEST(OutputTailTest, PrintsTheTailOnlyWhenNotEchoed) {
  std::FILE* quiet_out = std::tmpfile();
  std::FILE* echo_out = std::tmpfile();
  ASSERT_NE(quiet_out, nullptr);
  ASSERT_NE(echo_out, nullptr);
  OutputTail quiet(false, 2, quiet_out);
  OutputTail echo(true, 2, echo_out);
  for (const char* l : {"a", "b", "c"}) {
    quiet.add("x", l);
    echo.add("x", l);
  }
  EXPECT_EQ(contents(quiet_out), "");  // nothing until print()
  quiet.print();
  EXPECT_EQ(contents(quiet_out), "[x] b\n[x] c\n");
  EXPECT_EQ(contents(echo_out), "[x] a\n[x] b\n[x] c\n");  // every line, as it came
  echo.print();
  EXPECT_EQ(contents(echo_out), "[x] a\n[x] b\n[x] c\n");
  std::fclose(quiet_out);
  std::fclose(echo_out);
}

TEST(OutputTailTest, ConcurrentWritersKeepTheCapacity) {
  OutputTail tail(false, 10);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&tail, t] {
      for (int i = 0; i < 500; ++i) tail.add("t" + std::to_string(t), std::to_string(i));
    });
  }
  for (std::thread& th : threads) th.join();
  const std::vector<std::string> lines = tail.lines();
  ASSERT_EQ(lines.size(), 10u);
  int last_lines = 0;  // each thread's final line is among the newest unless 10 others followed
  for (const std::string& l : lines) last_lines += l.ends_with("] 499") ? 1 : 0;
  EXPECT_GE(last_lines, 1);
}

}  // namespace
}  // namespace keel::proc
