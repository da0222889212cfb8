// Thin RAII over libzmq for the cluster's sockets: a context and sockets that close with linger 0
// (so shutdown never waits on unsent messages), multipart send/receive, 8-byte big-endian
// sequence numbers (vLLM's framing). Errors are Status values naming the call and zmq_strerror.
// Thread safety: a ZmqSocket is used by one thread at a time (libzmq's rule; handing it to another
// thread needs a memory barrier such as a thread start); ZmqContext is thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/status.h"

namespace keel::net {

class ZmqContext {
 public:
  ZmqContext();
  ~ZmqContext();  // every socket of the context must be closed first
  ZmqContext(const ZmqContext&) = delete;
  ZmqContext& operator=(const ZmqContext&) = delete;
  [[nodiscard]] void* get() const { return ctx_; }

 private:
  void* ctx_;
};

class ZmqSocket {
 public:
  ZmqSocket() = default;
  // A socket of `type` (ZMQ_PUB, ...) with linger 0.
  static Result<ZmqSocket> open(const ZmqContext& ctx, int type);
  ~ZmqSocket() { close(); }
  ZmqSocket(ZmqSocket&& o) noexcept : sock_(o.sock_) { o.sock_ = nullptr; }
  ZmqSocket& operator=(ZmqSocket&& o) noexcept;
  ZmqSocket(const ZmqSocket&) = delete;
  ZmqSocket& operator=(const ZmqSocket&) = delete;

  void close();
  [[nodiscard]] void* get() const { return sock_; }
  Status set_int(int option, int value);
  Status set_bytes(int option, std::string_view value);
  Status bind(const std::string& endpoint);
  Status connect(const std::string& endpoint);
  // ZMQ_LAST_ENDPOINT: the endpoint actually bound (the port chosen for ":0" or ":*").
  [[nodiscard]] std::string last_endpoint() const;

  // Sends all frames as one message; false when it would block (ZMQ_DONTWAIT) or failed.
  bool send(const std::vector<std::string_view>& frames);
  // Receives one whole message without waiting; nullopt when none is ready.
  std::optional<std::vector<std::string>> try_recv();
  // Waits up to timeout_ms (−1: forever) for the socket to become readable.
  bool wait_readable(int timeout_ms);

 private:
  explicit ZmqSocket(void* sock) : sock_(sock) {}
  void* sock_ = nullptr;
};

// vLLM's sequence framing: a signed 64-bit integer, 8 bytes big-endian.
[[nodiscard]] std::string encode_seq(int64_t seq);
// nullopt unless `frame` has exactly 8 bytes.
[[nodiscard]] std::optional<int64_t> decode_seq(std::string_view frame);

}  // namespace keel::net
