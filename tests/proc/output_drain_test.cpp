// OutputDrain over plain pipes: line splitting across reads, '\r' stripping, long lines cut,
// the partial last line flushed, the ready line handed over, and finish() returning while a
// writer still holds the pipe open.
#include "proc/output_drain.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace keel::proc {
namespace {

using std::chrono::milliseconds;

struct Collected {
  std::mutex mu;
  std::vector<std::string> lines;
  OutputDrain::LineSink sink() {
    return [this](std::string_view line) {
      std::lock_guard lock(mu);
      lines.emplace_back(line);
    };
  }
};

void write_str(int fd, const std::string& s) {
  ASSERT_EQ(::write(fd, s.data(), s.size()), static_cast<ssize_t>(s.size()));
}

TEST(OutputDrainTest, SplitsLinesAndFlushesThePartialLastOne) {
  int out[2], err[2];
  ASSERT_EQ(::pipe(out), 0);
  ASSERT_EQ(::pipe(err), 0);
  Collected got;
  {
    OutputDrain drain(out[0], err[0], got.sink());
    write_str(out[1], "one\ntw");
    std::this_thread::sleep_for(milliseconds(20));
    write_str(out[1], "o\r\nthree");
    write_str(err[1], "e1\n");
    ::close(out[1]);
    ::close(err[1]);
    drain.finish();
  }
  std::sort(got.lines.begin(), got.lines.end());
  EXPECT_EQ(got.lines, (std::vector<std::string>{"e1", "one", "three", "two"}));
}

TEST(OutputDrainTest, CutsOverlongLines) {
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  Collected got;
  OutputDrain drain(out[0], -1, got.sink());
  std::thread writer([fd = out[1]] {
    const std::string big(150 * 1024, 'x');
    size_t done = 0;
    while (done < big.size()) {
      const ssize_t n = ::write(fd, big.data() + done, big.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  });
  writer.join();
  drain.finish();
  ASSERT_EQ(got.lines.size(), 3u);
  EXPECT_EQ(got.lines[0].size(), 64u * 1024);
  EXPECT_EQ(got.lines[1].size(), 64u * 1024);
  EXPECT_EQ(got.lines[2].size(), 22u * 1024);
}

TEST(OutputDrainTest, HandsOverTheFirstReadyLineFromStdoutOnly) {
  int out[2], err[2];
  ASSERT_EQ(::pipe(out), 0);
  ASSERT_EQ(::pipe(err), 0);
  Collected got;
  OutputDrain drain(out[0], err[0], got.sink());
  const auto soon = [] { return std::chrono::steady_clock::now() + milliseconds(50); };
  write_str(err[1], "KEEL_READY {\"from\":\"stderr\"}\n");
  EXPECT_FALSE(drain.wait_ready_line(soon()).has_value());
  write_str(out[1], "log line\nKEEL_READY {\"n\":1}\nKEEL_READY {\"n\":2}\n");
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(3000);
  std::optional<std::string> ready = drain.wait_ready_line(deadline);
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(*ready, "KEEL_READY {\"n\":1}");
  // finish() returns although the write ends are still open (a grandchild may hold them).
  const auto start = std::chrono::steady_clock::now();
  drain.finish();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000));
  EXPECT_EQ(got.lines.size(), 4u);
  ::close(out[1]);
  ::close(err[1]);
}

}  // namespace
}  // namespace keel::proc
