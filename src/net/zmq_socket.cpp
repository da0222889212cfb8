// RAII over libzmq (see zmq_socket.h).
#include "net/zmq_socket.h"

#include <zmq.h>

#include <cerrno>

#include "core/check.h"

namespace keel::net {
namespace {

Status zmq_error(std::string_view call, const std::string& detail = {}) {
  std::string msg = "zmq " + std::string(call);
  if (!detail.empty()) msg += " " + detail;
  return Status::io_error(msg + ": " + zmq_strerror(zmq_errno()));
}

}  // namespace

ZmqContext::ZmqContext() : ctx_(zmq_ctx_new()) { KEEL_CHECK_MSG(ctx_ != nullptr, "zmq_ctx_new"); }

ZmqContext::~ZmqContext() {
  while (zmq_ctx_term(ctx_) != 0 && zmq_errno() == EINTR) {
  }
}

Result<ZmqSocket> ZmqSocket::open(const ZmqContext& ctx, int type) {
  void* s = zmq_socket(ctx.get(), type);
  if (s == nullptr) return zmq_error("socket");
  ZmqSocket sock(s);
  KEEL_TRY(sock.set_int(ZMQ_LINGER, 0));
  return sock;
}

ZmqSocket& ZmqSocket::operator=(ZmqSocket&& o) noexcept {
  if (this != &o) {
    close();
    sock_ = o.sock_;
    o.sock_ = nullptr;
  }
  return *this;
}

void ZmqSocket::close() {
  if (sock_ != nullptr) zmq_close(sock_);
  sock_ = nullptr;
}

Status ZmqSocket::set_int(int option, int value) {
  if (zmq_setsockopt(sock_, option, &value, sizeof(value)) != 0) {
    return zmq_error("setsockopt", std::to_string(option));
  }
  return Status::ok_status();
}

Status ZmqSocket::set_bytes(int option, std::string_view value) {
  if (zmq_setsockopt(sock_, option, value.data(), value.size()) != 0) {
    return zmq_error("setsockopt", std::to_string(option));
  }
  return Status::ok_status();
}

Status ZmqSocket::bind(const std::string& endpoint) {
  if (zmq_bind(sock_, endpoint.c_str()) != 0) return zmq_error("bind", endpoint);
  return Status::ok_status();
}

Status ZmqSocket::connect(const std::string& endpoint) {
  if (zmq_connect(sock_, endpoint.c_str()) != 0) return zmq_error("connect", endpoint);
  return Status::ok_status();
}

std::string ZmqSocket::last_endpoint() const {
  char buf[512];
  size_t len = sizeof(buf);
  if (zmq_getsockopt(sock_, ZMQ_LAST_ENDPOINT, buf, &len) != 0 || len == 0) return {};
  return std::string(buf, len - 1);  // len counts the terminating NUL
}

bool ZmqSocket::send(const std::vector<std::string_view>& frames) {
  for (size_t i = 0; i < frames.size(); ++i) {
    const int flags = ZMQ_DONTWAIT | (i + 1 < frames.size() ? ZMQ_SNDMORE : 0);
    // After the first frame of a message is queued, libzmq queues the rest atomically.
    if (zmq_send(sock_, frames[i].data(), frames[i].size(), flags) < 0) return false;
  }
  return true;
}

std::optional<std::vector<std::string>> ZmqSocket::try_recv() {
  std::vector<std::string> frames;
  int flags = ZMQ_DONTWAIT;
  while (true) {
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, sock_, flags) < 0) {
      zmq_msg_close(&msg);
      // Only the first frame can be missing: the rest of a message arrives with it.
      return std::nullopt;
    }
    frames.emplace_back(static_cast<const char*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
    const bool more = zmq_msg_more(&msg) != 0;
    zmq_msg_close(&msg);
    if (!more) return frames;
    flags = 0;
  }
}

bool ZmqSocket::wait_readable(int timeout_ms) {
  zmq_pollitem_t item{sock_, 0, ZMQ_POLLIN, 0};
  return zmq_poll(&item, 1, timeout_ms) > 0 && (item.revents & ZMQ_POLLIN) != 0;
}

std::string encode_seq(int64_t seq) {
  const auto u = static_cast<uint64_t>(seq);
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((u >> (56 - 8 * i)) & 0xff);
  return out;
}

std::optional<int64_t> decode_seq(std::string_view frame) {
  if (frame.size() != 8) return std::nullopt;
  uint64_t u = 0;
  for (unsigned char c : frame) u = (u << 8) | c;
  return static_cast<int64_t>(u);
}

}  // namespace keel::net
