// Link (see link.h): framing, the reader and writer threads, calls matched by call_id.
#include "net/link.h"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <exception>
#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "core/log.h"
#include "net/bounded_msgpack.h"
#include "net/host_port.h"

namespace keel::net {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

Status invalid(const std::string& what) { return Status::invalid_argument("link: " + what); }

// A frame's payload at least this long is checked (its first byte) before its buffer is sized.
constexpr size_t kCheckedFrameBytes = size_t{64} << 10;

bool printable(uint8_t c) { return (c >= 0x20 && c < 0x7f) || c == '\r' || c == '\n' || c == '\t'; }

// The first line of what a foreign peer sent, quoted and bounded, for an error message.
std::string quoted_head(std::span<const uint8_t> head, std::string_view more) {
  std::string text(head.begin(), head.end());
  text += more;
  text = text.substr(0, std::min(text.find_first_of("\r\n"), size_t{60}));
  for (char& c : text) {
    if (!printable(static_cast<uint8_t>(c))) c = '?';
  }
  return "\"" + text + "\"";
}

// One connect attempt that gives up at `deadline` (a blocking connect to a host that drops
// packets — cut off, its link down — would wait for the kernel's SYN retries, minutes).
boost::system::error_code connect_by(asio::io_context& io, tcp::socket& socket,
                                     const tcp::resolver::results_type& endpoints,
                                     std::chrono::steady_clock::time_point deadline) {
  boost::system::error_code result = asio::error::would_block;
  asio::async_connect(
      socket, endpoints,
      [&result](const boost::system::error_code& e, const tcp::endpoint&) { result = e; });
  io.restart();
  const auto left = deadline - std::chrono::steady_clock::now();
  io.run_for(std::max<std::chrono::steady_clock::duration>(left, std::chrono::milliseconds(1)));
  if (result != asio::error::would_block) return result;
  boost::system::error_code ignored;
  socket.close(ignored);  // the deadline came first: cancel, and let the handler run
  io.restart();
  io.run();
  return asio::error::timed_out;
}

}  // namespace

std::vector<uint8_t> encode_message(const Message& message) {
  Json envelope = Json::object();
  envelope["v"] = kLinkVersion;
  envelope["type"] = message.type;
  envelope["body"] = message.body;
  return Json::to_msgpack(envelope);
}

Result<Message> decode_message(std::span<const uint8_t> bytes) {
  Result<Json> parsed = parse_bounded_msgpack(bytes, kMaxLinkDepth);
  if (!parsed.ok()) return invalid(parsed.status().message());
  Json doc = std::move(*parsed);
  if (!doc.is_object()) return invalid("a message is a map");
  const auto v = doc.find("v");
  if (v == doc.end() || !v->is_number_integer() || v->get<int64_t>() != kLinkVersion) {
    return invalid("missing or unsupported version");
  }
  const auto type = doc.find("type");
  if (type == doc.end() || !type->is_string()) return invalid("no message type");
  auto body = doc.find("body");
  if (body == doc.end() || !body->is_object()) return invalid("no message body");
  return Message{type->get<std::string>(), std::move(*body)};
}

Status check_frame_head(std::span<const uint8_t> head, size_t length, std::optional<uint8_t> first,
                        std::string_view more) {
  if (!head.empty() && std::all_of(head.begin(), head.end(), printable)) {
    const bool http = std::string_view(reinterpret_cast<const char*>(head.data()), head.size())
                          .starts_with("HTTP");
    return Status::invalid_argument(
        "the peer is not a keel cluster endpoint: it sent " + quoted_head(head, more) +
        (http ? " (an HTTP server: is this the gateway's HTTP port? a control port is named by "
                "the gateway's ready line, \"control_port\")"
              : " (text, not a framed keel message)"));
  }
  if (length > kMaxFrameBytes) {
    return Status::invalid_argument("the peer sent a frame of " + std::to_string(length) +
                                    " bytes, over the " + std::to_string(kMaxFrameBytes >> 20) +
                                    " MiB limit: not a keel cluster endpoint, or a broken one");
  }
  // A keel envelope is a MessagePack map: fixmap (0x80-0x8f), map16 (0xde) or map32 (0xdf).
  if (first && !((*first & 0xf0) == 0x80 || *first == 0xde || *first == 0xdf)) {
    return Status::invalid_argument(
        "the peer sent a frame that is not a keel message (it does not open a MessagePack map)");
  }
  return Status::ok_status();
}

Link::Link(tcp::socket socket, MessageHandler on_message, CloseHandler on_close,
           std::string peer_name)
    : socket_(io_, tcp::v4(), socket.release()),
      on_message_(std::move(on_message)),
      on_close_(std::move(on_close)),
      peer_(std::move(peer_name)) {}

std::shared_ptr<Link> Link::start(tcp::socket socket, MessageHandler on_message,
                                  CloseHandler on_close, std::string peer_name) {
  boost::system::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  std::shared_ptr<Link> link(new Link(std::move(socket), std::move(on_message), std::move(on_close),
                                      std::move(peer_name)));
  link->reader_ = std::thread([l = link.get()] { l->run_reader(); });
  link->writer_ = std::thread([l = link.get()] { l->run_writer(); });
  return link;
}

Result<std::shared_ptr<Link>> Link::connect(const std::string& address,
                                            std::chrono::milliseconds timeout,
                                            MessageHandler on_message, CloseHandler on_close) {
  KEEL_ASSIGN_OR_RETURN(const HostPort hp, parse_host_port(address));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  asio::io_context io;
  Status last = Status::unavailable("cannot connect to " + address);
  // A peer that is still starting refuses connections: retry until the deadline.
  while (true) {
    boost::system::error_code ec;
    tcp::resolver resolver(io);
    auto endpoints = resolver.resolve(hp.host, std::to_string(hp.port), ec);
    if (!ec) {
      tcp::socket socket(io);
      ec = connect_by(io, socket, endpoints, deadline);
      if (!ec) return start(std::move(socket), std::move(on_message), std::move(on_close), address);
    }
    last = Status::unavailable("cannot connect to " + address + ": " + ec.message());
    if (std::chrono::steady_clock::now() + std::chrono::milliseconds(50) > deadline) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Link::~Link() {
  close();
  // The owner's rule is to never drop the last reference inside a handler; should it happen, the
  // reader has nothing left to touch, so it is let go rather than joined by itself.
  for (std::thread* t : {&reader_, &writer_}) {
    if (!t->joinable()) continue;
    if (t->get_id() == std::this_thread::get_id()) {
      t->detach();
    } else {
      t->join();
    }
  }
}

bool Link::send(Message message, std::function<void()> on_written) {
  std::vector<uint8_t> payload = encode_message(message);
  MutexLock lock(mu_);
  if (closed_) return false;
  outbox_.push_back(Outgoing{std::move(payload), std::move(on_written)});
  cv_.notify_all();
  return true;
}

Result<Json> Link::call(Message message, std::chrono::milliseconds timeout) {
  auto pending = std::make_shared<PendingCall>();
  int64_t id = 0;
  {
    MutexLock lock(mu_);
    if (closed_) return Status::unavailable("link to " + peer_ + " is closed");
    id = next_call_id_++;
    calls_[id] = pending;
  }
  message.body["call_id"] = id;
  if (!send(std::move(message))) return Status::unavailable("link to " + peer_ + " is closed");
  UniqueLock lock(mu_);
  const bool done = cv_.wait_for(lock.native(), timeout, [&] { return pending->done; });
  calls_.erase(id);
  if (!done) {
    return Status::unavailable("no reply from " + peer_ + " within " +
                               std::to_string(timeout.count()) + " ms");
  }
  if (pending->reply) return std::move(*pending->reply);
  return pending->error;
}

void Link::call_async(Message message, std::chrono::milliseconds timeout, CallDone done) {
  auto pending = std::make_shared<PendingCall>();
  pending->on_done = std::move(done);
  pending->timeout = timeout;
  pending->deadline = std::chrono::steady_clock::now() + timeout;
  int64_t id = 0;
  {
    MutexLock lock(mu_);
    if (!closed_) {
      id = next_call_id_++;
      calls_[id] = pending;
      next_deadline_ = std::min(next_deadline_, pending->deadline);
    }
  }
  if (id == 0) return run_done(*pending, Status::unavailable("link to " + peer_ + " is closed"));
  message.body["call_id"] = id;
  if (send(std::move(message))) return;  // send() woke the writer: it minds the deadline
  {
    MutexLock lock(mu_);
    if (calls_.erase(id) == 0) return;  // the reader, ending, failed it already
  }
  run_done(*pending, Status::unavailable("link to " + peer_ + " is closed"));
}

void Link::run_done(PendingCall& call, Result<Json> result) {
  try {
    call.on_done(std::move(result));
  } catch (const std::exception& e) {  // a continuation's bug must not take the process down
    KEEL_LOG_ERROR("link {}: a call's continuation failed: {}", peer_, e.what());
  }
}

std::vector<std::shared_ptr<Link::PendingCall>> Link::take_expired_calls(
    std::chrono::steady_clock::time_point now, std::chrono::steady_clock::time_point* next) {
  std::vector<std::shared_ptr<PendingCall>> expired;
  *next = std::chrono::steady_clock::time_point::max();
  if (now < next_deadline_) {  // none can have passed: no scan
    *next = next_deadline_;
    return expired;
  }
  for (auto it = calls_.begin(); it != calls_.end();) {
    const std::shared_ptr<PendingCall>& call = it->second;
    if (!call->on_done) {
      ++it;
    } else if (call->deadline <= now) {
      expired.push_back(call);
      it = calls_.erase(it);
    } else {
      *next = std::min(*next, call->deadline);
      ++it;
    }
  }
  next_deadline_ = *next;  // calls answered since leave it early: one scan more, never late
  return expired;
}

void Link::fail_async_calls() {
  std::vector<std::shared_ptr<PendingCall>> failed;
  Status why;
  {
    MutexLock lock(mu_);
    for (auto it = calls_.begin(); it != calls_.end();) {
      if (it->second->on_done) {
        failed.push_back(it->second);
        it = calls_.erase(it);
      } else {
        ++it;
      }
    }
    why = close_reason_.ok() ? Status::unavailable("link to " + peer_ + " closed")
                             : Status(close_reason_.code(), peer_ + ": " + close_reason_.message());
  }
  for (const auto& call : failed) run_done(*call, why);
}

bool Link::reply(int64_t call_id, Json body) {
  body["call_id"] = call_id;
  return send(Message{"reply", std::move(body)});
}

void Link::close() { close_for(Status::ok_status()); }

void Link::close_for(Status reason) {
  MutexLock lock(mu_);
  if (closed_) return;
  closed_ = true;
  close_reason_ = reason;
  ::shutdown(socket_.native_handle(), SHUT_RDWR);
  for (auto& [id, call] : calls_) {
    call->done = true;
    call->error = reason.ok() ? Status::unavailable("link to " + peer_ + " closed")
                              : Status(reason.code(), peer_ + ": " + reason.message());
  }
  cv_.notify_all();
}

bool Link::closed() const {
  MutexLock lock(mu_);
  return closed_;
}

Status Link::close_reason() const {
  MutexLock lock(mu_);
  return close_reason_;
}

bool Link::read_frame(std::vector<uint8_t>* out) {
  std::array<uint8_t, 4> header{};
  boost::system::error_code ec;
  asio::read(socket_, asio::buffer(header), ec);
  if (ec) return false;
  const size_t n = (size_t{header[0]} << 24) | (size_t{header[1]} << 16) |
                   (size_t{header[2]} << 8) | size_t{header[3]};
  // True when the frame may be a keel frame; otherwise closes the link, saying why.
  const auto checked = [&](std::optional<uint8_t> first) {
    Status s = check_frame_head(header, n, first);
    if (s.ok()) return true;
    std::array<char, 64> buf{};  // what else a foreign peer already sent (never waits for more)
    const size_t ready = std::min(socket_.available(ec), buf.size());
    if (!ec && ready > 0) {
      const size_t got = socket_.read_some(asio::buffer(buf.data(), ready), ec);
      s = check_frame_head(header, n, first, std::string_view(buf.data(), ec ? 0 : got));
    }
    KEEL_LOG_WARN("link {}: {}; closing", peer_, s.message());
    close_for(s);
    return false;
  };
  if (!checked(std::nullopt)) return false;
  if (n == 0) return false;  // an empty frame is no envelope
  // A large frame's first byte is checked before its buffer is sized (a foreign peer's
  // "length" could otherwise cost up to kMaxFrameBytes of memory).
  size_t at = 0;
  if (n >= kCheckedFrameBytes) {
    uint8_t first = 0;
    asio::read(socket_, asio::buffer(&first, 1), ec);
    if (ec) return false;
    if (!checked(first)) return false;
    out->resize(n);
    (*out)[0] = first;
    at = 1;
  } else {
    out->resize(n);
  }
  asio::read(socket_, asio::buffer(out->data() + at, n - at), ec);
  return !ec;
}

void Link::deliver(Message message) {
  if (message.type == "reply") {
    const auto id = message.body.find("call_id");
    if (id == message.body.end() || !id->is_number_integer()) return;
    std::shared_ptr<PendingCall> async;
    {
      MutexLock lock(mu_);
      const auto it = calls_.find(id->get<int64_t>());
      if (it == calls_.end()) return;  // the caller gave up
      if (it->second->on_done) {
        async = it->second;
        calls_.erase(it);
      } else {
        it->second->done = true;
        it->second->reply = std::move(message.body);
        cv_.notify_all();
        return;
      }
    }
    run_done(*async, std::move(message.body));
    return;
  }
  if (on_message_) on_message_(*this, std::move(message));
}

void Link::run_reader() {
  std::vector<uint8_t> frame;
  while (read_frame(&frame)) {
    Result<Message> message = decode_message(frame);
    if (!message.ok()) {
      KEEL_LOG_WARN("link {}: {}; closing", peer_, message.status().message());
      close_for(message.status());
      break;
    }
    try {
      deliver(std::move(*message));
    } catch (const std::exception& e) {  // a handler's bug must not take the process down
      KEEL_LOG_ERROR("link {}: handler failed: {}", peer_, e.what());
    }
  }
  close();
  fail_async_calls();
  if (on_close_) on_close_(*this);
}

void Link::run_writer() {
  while (true) {
    Outgoing out;
    std::vector<std::shared_ptr<PendingCall>> expired;
    {
      UniqueLock lock(mu_);
      // Waits for a frame to write, minding the asynchronous calls' deadlines meanwhile.
      while (!closed_) {
        std::chrono::steady_clock::time_point next;
        expired = take_expired_calls(std::chrono::steady_clock::now(), &next);
        if (!expired.empty() || !outbox_.empty()) break;
        if (next == std::chrono::steady_clock::time_point::max()) {
          cv_.wait(lock.native());
        } else {
          cv_.wait_until(lock.native(), next);
        }
      }
      if (closed_) return;  // the reader fails the calls left as it ends
      if (expired.empty()) {
        out = std::move(outbox_.front());
        outbox_.pop_front();
      }
    }
    if (!expired.empty()) {
      for (const auto& call : expired) {
        run_done(*call, Status::unavailable("no reply from " + peer_ + " within " +
                                            std::to_string(call->timeout.count()) + " ms"));
      }
      continue;
    }
    const std::vector<uint8_t>& payload = out.payload;
    const uint32_t n = static_cast<uint32_t>(payload.size());
    const std::array<uint8_t, 4> header{static_cast<uint8_t>(n >> 24),
                                        static_cast<uint8_t>(n >> 16), static_cast<uint8_t>(n >> 8),
                                        static_cast<uint8_t>(n)};
    boost::system::error_code ec;
    const std::array<asio::const_buffer, 2> buffers{asio::buffer(header), asio::buffer(payload)};
    asio::write(socket_, buffers, ec);
    if (ec) {
      close();
      return;
    }
    if (out.on_written) out.on_written();
  }
}

}  // namespace keel::net
