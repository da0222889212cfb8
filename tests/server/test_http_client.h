// A tiny blocking HTTP/1.1 client over POSIX sockets for the server tests: send raw requests,
// read responses with Content-Length or chunked bodies, parse SSE events. Reads time out (10 s by
// default) so a broken server fails a test instead of hanging it.
//
// Thread safety: one client per thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace keel::server::testing {

struct HttpResult {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  bool chunked = false;

  [[nodiscard]] std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
  [[nodiscard]] nlohmann::json json() const { return nlohmann::json::parse(body); }
  // "data: " payloads of an SSE body, in order (frames split on "\n\n"; a frame may open with
  // an "event: " line).
  [[nodiscard]] std::vector<std::string> sse_data() const;
};

class TestHttpClient {
 public:
  // `source_ip` (an IPv4 literal, e.g. "127.0.0.2"): the address to connect from (another
  // client address on loopback); nullptr: the kernel's choice.
  explicit TestHttpClient(uint16_t port, int timeout_ms = 10'000, const char* source_ip = nullptr);
  ~TestHttpClient();
  TestHttpClient(const TestHttpClient&) = delete;
  TestHttpClient& operator=(const TestHttpClient&) = delete;

  [[nodiscard]] bool connected() const { return fd_ >= 0; }
  bool send_raw(const std::string& bytes);
  // Sends a request; `headers` lines "Name: value" (no CRLF).
  bool send(const std::string& method, const std::string& path, const std::string& body = "",
            const std::vector<std::string>& headers = {}, bool keep_alive = true);
  // Reads one full response (nullopt on timeout/close before a complete response).
  std::optional<HttpResult> read_response();
  // Reads only the status line and headers of a response (for streams read incrementally).
  std::optional<HttpResult> read_head();
  // Reads until the peer closes or `timeout_ms` passes; true if the peer closed.
  bool wait_closed(int timeout_ms);
  void close();
  // Closes with an RST (SO_LINGER 0) instead of a FIN.
  void reset();

 private:
  bool fill();  // reads more bytes into buf_; false on close/error/timeout
  std::optional<std::string> read_line();
  std::optional<std::string> read_exact(size_t n);
  int fd_ = -1;
  std::string buf_;
};

// One request on a fresh connection.
HttpResult http_request(uint16_t port, const std::string& method, const std::string& path,
                        const std::string& body = "", const std::vector<std::string>& headers = {});
inline HttpResult post_json(uint16_t port, const std::string& path, const nlohmann::json& body,
                            const std::vector<std::string>& headers = {}) {
  return http_request(port, "POST", path, body.dump(), headers);
}

}  // namespace keel::server::testing
