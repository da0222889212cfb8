// ServeProcess: starts `keel serve` on 127.0.0.1 with an ephemeral port as a child process, waits
// for its "listening on" log line, and stops it (SIGTERM, then SIGKILL) when destroyed. Also a
// small blocking HTTP/1.1 client for end-to-end tests: whole responses, SSE streams read chunk by
// chunk, and connections dropped mid-request.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace keel::testing {

struct ServeProcessOptions {
  // stderr goes to a pipe instead of a file (its lines up to "ready" still reach log()), so that
  // a test can close the reading end (close_log_pipe()).
  bool stderr_pipe = false;
  // When > 0, the child starts with this soft RLIMIT_NOFILE (the hard limit unchanged).
  int nofile_soft_limit = 0;
  // The address to listen on, and what runs keel (e.g. {"ip", "netns", "exec", NS}: a command
  // that execs its arguments, so the pid stays keel's).
  std::string host = "127.0.0.1";
  std::vector<std::string> wrapper;
};

class ServeProcess {
 public:
  // Runs `keel serve <args...> --host 127.0.0.1 --port 0` (options.host, options.wrapper); check
  // ok() and error().
  explicit ServeProcess(const std::vector<std::string>& args,
                        const std::vector<std::string>& env = {},
                        const ServeProcessOptions& options = {});
  ~ServeProcess();

  [[nodiscard]] bool ok() const { return port_ > 0; }
  [[nodiscard]] const std::string& error() const { return error_; }
  [[nodiscard]] int port() const { return port_; }
  // Sends SIGTERM and waits for the exit code (-1 on timeout).
  int terminate_and_wait(int timeout_ms);
  // Sends `sig` and waits for the exit code: the status, or 128 + the signal that killed it
  // (-1 on timeout).
  int signal_and_wait(int sig, int timeout_ms);
  // With stderr_pipe: closes the pipe's reading end; the server's next log line meets EPIPE.
  void close_log_pipe();
  // Everything the server wrote to stderr so far.
  [[nodiscard]] std::string log() const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int log_pipe_ = -1;  // reading end, with stderr_pipe
  std::string log_path_;
  std::string error_;
};

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

// One request on a fresh connection; status 0 and body = error text when the connection failed.
HttpResponse http_request(int port, const std::string& method, const std::string& target,
                          const std::string& body = "",
                          const std::map<std::string, std::string>& headers = {});

// An open connection for streaming and disconnect tests.
class HttpConnection {
 public:
  explicit HttpConnection(int port);
  ~HttpConnection();
  [[nodiscard]] bool connected() const { return fd_ >= 0; }
  // Sends a POST with a JSON body.
  bool send_post(const std::string& target, const std::string& body,
                 const std::map<std::string, std::string>& headers = {});
  // Reads until `pred(received_so_far)` is true, EOF, or timeout; returns what was received.
  std::string read_until(const std::function<bool(const std::string&)>& pred, int timeout_ms);
  // Closes the socket abruptly (the server sees a disconnect).
  void close();

 private:
  int fd_ = -1;
  std::string received_;
};

// The value of the first sample in Prometheus text `text` whose metric name is `name` and whose
// label set contains `label` (any sample when empty); -1 when there is none.
double metric_value(const std::string& text, const std::string& name,
                    const std::string& label = "");

// The `data:` payloads of an SSE body, in order ("[DONE]" included).
std::vector<std::string> sse_events(const std::string& body);

// The concatenated `choices[].text` of an SSE completion stream `raw` (up to "[DONE]"); sets
// *error when an event is an error object or not JSON.
std::string completion_stream_text(const std::string& raw, bool* error);

}  // namespace keel::testing
