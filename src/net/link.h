// Link: one TCP connection between two cluster processes (gateway ↔ JE, JE ↔ TE, TE → gateway)
// carrying framed messages both ways. A frame is a 4-byte big-endian length and a MessagePack
// envelope {"v": kVersion, "type": "<name>", "body": {...}} (messages.h names the types). Calls
// (request → reply) are matched by a "call_id" in the body; everything else is delivered to the
// message handler in arrival order.
//
// Threads: each link has a reader thread (blocking reads; it runs the handlers, so a handler must
// not block on this same link's replies — nor, by the house rule, on any remote call: it uses
// call_async) and a writer thread (send() only queues, never blocks on the network; it also ends
// asynchronous calls whose deadline passed). close() shuts the socket down, which wakes both; the
// close handler runs once, on the reader thread, when the connection ends for any reason (peer
// gone, protocol error, close()). A frame larger than kMaxFrameBytes or that does not parse closes
// the link; so does a peer that is not a keel cluster process (its first bytes are text, e.g. an
// HTTP server's reply, or a large frame's payload does not open a MessagePack map — checked before
// the payload's buffer is allocated): calls pending on the link then fail with why
// (close_reason()).
//
// Sockets are Asio's (connect, accept, read, write); shutdown from another thread goes through
// the native handle, which leaves the Asio object untouched.
//
// Thread safety: every public member may be called from any thread; the destructor must not run
// on the link's own threads (keep the shared_ptr alive in the handlers' owner).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <nlohmann/json.hpp>

#include "core/mutex.h"
#include "core/result.h"

namespace keel::net {

using Json = nlohmann::json;

inline constexpr int64_t kLinkVersion = 1;
inline constexpr size_t kMaxFrameBytes = size_t{64} << 20;
inline constexpr int kMaxLinkDepth = 16;  // a frame's MessagePack nesting (bounded_msgpack.h)

struct Message {
  std::string type;
  Json body = Json::object();
};

class Link : public std::enable_shared_from_this<Link> {
 public:
  using MessageHandler = std::function<void(Link&, Message)>;
  using CloseHandler = std::function<void(Link&)>;

  // Takes a connected socket and starts the reader and writer.
  static std::shared_ptr<Link> start(boost::asio::ip::tcp::socket socket, MessageHandler on_message,
                                     CloseHandler on_close, std::string peer_name);
  // Connects to "host:port" within `timeout`. Unavailable when the peer does not answer.
  static Result<std::shared_ptr<Link>> connect(const std::string& address,
                                               std::chrono::milliseconds timeout,
                                               MessageHandler on_message, CloseHandler on_close);

  ~Link();
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // Queues a message; false when the link is closed. `on_written` (optional) runs on the writer
  // thread once the frame is in the kernel's socket buffer (never when the write fails).
  bool send(Message message, std::function<void()> on_written = nullptr);
  // Sends `message` with a fresh call_id and waits for the reply (a message of type "reply" with
  // the same call_id). Unavailable when the link closes first or no reply comes within `timeout`.
  // Never on this link's own reader thread (the reply would wait behind the handler).
  Result<Json> call(Message message, std::chrono::milliseconds timeout);
  // The same without waiting: `done` runs exactly once — on the reader thread with the reply, on
  // the writer thread when `timeout` passes first, on the reader thread as it ends when the link
  // closes first, or inline (before call_async returns) when the link is already closed. `done`
  // must not block: it runs on the link's own threads.
  using CallDone = std::function<void(Result<Json>)>;
  void call_async(Message message, std::chrono::milliseconds timeout, CallDone done);
  // Answers call `call_id` (from a received message's body) with `body`.
  bool reply(int64_t call_id, Json body);

  void close();
  [[nodiscard]] bool closed() const;
  // Why the link closed, when the peer broke the protocol (ok otherwise: closed by either side).
  [[nodiscard]] Status close_reason() const;
  [[nodiscard]] const std::string& peer() const { return peer_; }

 private:
  Link(boost::asio::ip::tcp::socket socket, MessageHandler on_message, CloseHandler on_close,
       std::string peer_name);
  void run_reader();
  void run_writer();
  bool read_frame(std::vector<uint8_t>* out);
  // Closes the link because the peer broke the protocol: pending calls fail with `reason`.
  void close_for(Status reason);
  void deliver(Message message);

  boost::asio::io_context io_;  // owns nothing but the socket's service
  boost::asio::ip::tcp::socket socket_;
  MessageHandler on_message_;
  CloseHandler on_close_;
  std::string peer_;

  mutable Mutex mu_;
  std::condition_variable cv_;
  bool closed_ KEEL_GUARDED_BY(mu_) = false;
  Status close_reason_ KEEL_GUARDED_BY(mu_);  // set by close_for()
  struct Outgoing {
    std::vector<uint8_t> payload;
    std::function<void()> on_written;
  };
  std::deque<Outgoing> outbox_ KEEL_GUARDED_BY(mu_);
  int64_t next_call_id_ KEEL_GUARDED_BY(mu_) = 1;
  // The earliest deadline of the asynchronous calls (max(): none), so the writer scans calls_
  // only when one may have passed, not on every frame.
  std::chrono::steady_clock::time_point next_deadline_ KEEL_GUARDED_BY(mu_) =
      std::chrono::steady_clock::time_point::max();
  struct PendingCall {
    // done, reply and error are guarded by the link's mu_ (an annotation here cannot name
    // another object's mutex): call() waits for them under it; the reader or close_for() sets
    // them under it.
    bool done = false;
    std::optional<Json> reply;  // set when answered; else `error` says why it ended
    Status error = Status::unavailable("link closed");
    // An asynchronous call's continuation and deadline (call_async); empty for call(). Set
    // before the call enters calls_, constant afterwards.
    CallDone on_done;
    std::chrono::steady_clock::time_point deadline;
    std::chrono::milliseconds timeout{0};
  };
  std::map<int64_t, std::shared_ptr<PendingCall>> calls_ KEEL_GUARDED_BY(mu_);
  // Asynchronous calls past their deadline, taken out of calls_, and the earliest deadline of
  // those left (time_point::max() when none).
  std::vector<std::shared_ptr<PendingCall>> take_expired_calls(
      std::chrono::steady_clock::time_point now, std::chrono::steady_clock::time_point* next)
      KEEL_REQUIRES(mu_);
  // Fails every asynchronous call still pending (the reader, as the link ends).
  void fail_async_calls();
  // Runs an asynchronous call's continuation (a throwing one is logged, not propagated).
  void run_done(PendingCall& call, Result<Json> result);

  std::thread reader_;
  std::thread writer_;
};

// Checks a frame's first bytes before its payload is read: `length` from the 4-byte header `head`,
// `first` the payload's first byte (when already read). InvalidArgument naming what the peer is
// when it cannot be a keel frame: text where the length should be ("it sent \"HTTP/1.1 400 ...\"
// — an HTTP server, not a keel cluster endpoint"; `more` is any text that followed, for the
// message), a length over kMaxFrameBytes, or a payload that does not open a MessagePack map.
[[nodiscard]] Status check_frame_head(std::span<const uint8_t> head, size_t length,
                                      std::optional<uint8_t> first, std::string_view more = {});

// Encodes / decodes one envelope (exposed for tests and the fuzz target).
[[nodiscard]] std::vector<uint8_t> encode_message(const Message& message);
[[nodiscard]] Result<Message> decode_message(std::span<const uint8_t> bytes);

}  // namespace keel::net
