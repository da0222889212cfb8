// OutputDrain: owns the read ends of one child's stdout and stderr pipes and the thread that reads
// them, so the child never blocks on a full pipe. Each complete line (newline and a trailing '\r'
// removed; lines over 64 KiB are cut into pieces) goes to a sink; the first stdout line that claims
// to be a ready line (ready_line.h) is also kept for wait_ready_line().
//
// Invariants: the sink is called only from the drain thread, never with the drain's mutex held;
// after finish() returns the thread is joined, the fds are closed and the sink is not called again.
// Thread safety: wait_ready_line() and finish() may be called from any one owning thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "core/mutex.h"

namespace keel::proc {

class OutputDrain {
 public:
  // Called from the drain thread with one line of the child's stdout or stderr.
  using LineSink = std::function<void(std::string_view line)>;

  // Takes ownership of both fds (either may be -1) and starts the thread.
  OutputDrain(int stdout_fd, int stderr_fd, LineSink sink);
  ~OutputDrain();  // finish()
  OutputDrain(const OutputDrain&) = delete;
  OutputDrain& operator=(const OutputDrain&) = delete;

  // The first ready-claiming stdout line, once read; waits for it until `deadline`.
  [[nodiscard]] std::optional<std::string> wait_ready_line(
      std::chrono::steady_clock::time_point deadline);

  // Reads what the pipes already hold (at most 1 MiB more, without waiting for writers), hands the
  // last partial lines to the sink, joins the thread and closes the fds. Idempotent.
  void finish();

 private:
  struct Stream {
    int fd = -1;
    bool is_stdout = false;
    std::string partial;  // bytes after the last newline
  };

  enum class ReadOutcome { kData, kEmpty, kClosed };

  void run();
  // Reads once from `s` and emits its complete lines; on EOF or a hard error closes the fd and
  // emits the partial last line.
  ReadOutcome read_some(Stream& s);
  void emit_lines(Stream& s, bool flush_partial);
  void emit(const Stream& s, std::string_view line);
  void drain_remaining();
  static void close_stream(Stream& s);

  LineSink sink_;
  Stream out_;
  Stream err_;
  int wake_fd_ = -1;  // eventfd; written by finish() to make the thread drain and exit
  bool finished_ = false;
  std::thread thread_;

  Mutex mu_;
  std::condition_variable ready_cv_;
  std::optional<std::string> ready_line_ KEEL_GUARDED_BY(mu_);
};

}  // namespace keel::proc
