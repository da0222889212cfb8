// FakeOpenAiServer: a small OpenAI-compatible streaming server for the load generator's end-to-end
// tests (Boost.Beast, coroutines, 127.0.0.1 on an ephemeral port, its own thread). Every POST to
// .../completions streams num_chunks content chunks with controlled delays, a usage chunk and
// [DONE] as chunked SSE; GET /v1/models lists one model. Faults (HTTP 500, a connection closed
// mid-stream, an error payload, a malformed payload) can be injected into every n-th request.
//
// Thread safety: construct and destroy on one thread; the counters and the recorded bodies may be
// read from any thread while it runs.
#pragma once

#include <utility>  // before Boost (see loadgen/http_client.h)

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace keel::testing {

enum class FakeFault {
  kNone,
  kHttp500,         // answer 500 with an OpenAI error body
  kCloseMidStream,  // send two content chunks, then close the connection
  kErrorPayload,    // send one content chunk, then data: {"error": ...}, then [DONE]
  kMalformed,       // send one content chunk, then data that is not JSON
  kNoDone,          // send every chunk and usage, then end the body without [DONE]
};

struct FakeServerOptions {
  int num_chunks = 5;        // content chunks per request (K)
  int first_delay_ms = 0;    // after the response header, before the first content chunk
  int chunk_delay_ms = 0;    // between successive content chunks
  bool send_usage = true;    // send the usage chunk (completion_tokens = num_chunks)
  bool split_events = true;  // write each event in two pieces (exercises partial reads)
  bool ping = true;          // start each stream with an SSE comment ": ping"
  FakeFault fault = FakeFault::kNone;
  int fault_every = 1;  // the fault hits POSTs whose 1-based number is a multiple of this
  std::string model_id = "fake-model";
  std::string required_api_key;  // non-empty: POSTs without "Bearer <key>" get 401
};

class FakeOpenAiServer {
 public:
  explicit FakeOpenAiServer(FakeServerOptions options);
  ~FakeOpenAiServer();
  FakeOpenAiServer(const FakeOpenAiServer&) = delete;
  FakeOpenAiServer& operator=(const FakeOpenAiServer&) = delete;

  [[nodiscard]] uint16_t port() const;
  [[nodiscard]] std::string base_url() const;
  [[nodiscard]] int64_t posts_seen() const;
  [[nodiscard]] int64_t connections_accepted() const;
  // The POST bodies received, in arrival order.
  [[nodiscard]] std::vector<std::string> bodies() const;
  // The x-request-id headers received, in arrival order.
  [[nodiscard]] std::vector<std::string> request_ids() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
};

}  // namespace keel::testing
