// TestHttpServer: a small HTTP/1.1 file server on 127.0.0.1 (a free port) for download tests.
// It serves `content` at /m/<name> and at any path with /resolve/ in it (Hugging Face's shape),
// honours "Range: bytes=N-" (206) unless told to ignore it, answers /r/<name> with a 302 to
// /m/<name>, everything else with 404. Faults: the first `drops` body responses close the
// connection after `drop_after` body bytes. It records each request's Range header ("" when none).
// One thread accepts; each connection is served on its own thread; stop() (or the destructor) ends
// them all.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace keel::testing {

struct TestHttpServerOptions {
  std::string content;
  std::string etag;           // sent as X-Linked-ETag when non-empty
  bool ignore_range = false;  // answer 200 with the whole body even to Range requests
  int drops = 0;              // responses cut short
  uint64_t drop_after = 0;    // ... after this many body bytes
};

class TestHttpServer {
 public:
  explicit TestHttpServer(TestHttpServerOptions options);
  ~TestHttpServer();
  TestHttpServer(const TestHttpServer&) = delete;
  TestHttpServer& operator=(const TestHttpServer&) = delete;

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string url(const std::string& path) const;
  [[nodiscard]] std::vector<std::string> ranges() const;  // in arrival order
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace keel::testing
