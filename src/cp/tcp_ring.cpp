// TcpRing: a context-parallel ring over TCP (see tcp_ring.h). Start-up runs on the caller's
// thread under a watchdog that shuts the sockets down at the deadline (a blocking accept, connect
// or read then fails at once); after it, a reader and a writer thread per member.
#include "cp/tcp_ring.h"

#include <sys/socket.h>

#include <array>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <nlohmann/json.hpp>

#include "core/mutex.h"
#include "net/host_port.h"

namespace keel::cp {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Json = nlohmann::json;
constexpr int kRingVersion = 1;
constexpr size_t kMaxHelloBytes = 4096;

Status write_frame(tcp::socket& s, const void* data, size_t n) {
  uint64_t len = n;
  boost::system::error_code ec;
  const std::array<asio::const_buffer, 2> bufs = {asio::buffer(&len, sizeof(len)),
                                                  asio::buffer(data, n)};
  asio::write(s, bufs, ec);
  if (ec) return Status::unavailable("context-parallel ring: send failed: " + ec.message());
  return Status();
}

Result<std::vector<std::byte>> read_frame(tcp::socket& s, size_t max_bytes) {
  uint64_t len = 0;
  boost::system::error_code ec;
  asio::read(s, asio::buffer(&len, sizeof(len)), ec);
  if (ec) return Status::unavailable("context-parallel ring: peer gone: " + ec.message());
  if (len > max_bytes) {
    return Status::corrupt("context-parallel ring: a frame of " + std::to_string(len) +
                           " bytes is over the limit of " + std::to_string(max_bytes));
  }
  std::vector<std::byte> out(len);
  asio::read(s, asio::buffer(out.data(), out.size()), ec);
  if (ec) return Status::unavailable("context-parallel ring: peer gone: " + ec.message());
  return out;
}

Status send_json(tcp::socket& s, const Json& j) {
  const std::string text = j.dump();
  return write_frame(s, text.data(), text.size());
}

Result<Json> read_json(tcp::socket& s) {
  KEEL_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, read_frame(s, kMaxHelloBytes));
  Json j = Json::parse(reinterpret_cast<const char*>(bytes.data()),
                       reinterpret_cast<const char*>(bytes.data()) + bytes.size(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("v", 0) != kRingVersion) {
    return Status::corrupt("context-parallel ring: a hello that is not this ring's version");
  }
  return j;
}

}  // namespace

struct TcpRing::State {
  TcpRingOptions options;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  tcp::socket next{io};  // written by the writer thread
  tcp::socket prev{io};  // read by the reader thread
  std::string address;   // this member's ring address as the others reach it

  Mutex mu;
  std::condition_variable cv;
  std::deque<model::CpMessage> outbox KEEL_GUARDED_BY(mu);
  bool writing KEEL_GUARDED_BY(mu) = false;
  std::deque<model::CpMessage> inbox KEEL_GUARDED_BY(mu);
  Status broken KEEL_GUARDED_BY(mu);  // why the ring stopped (OK while it runs)
  bool stopping KEEL_GUARDED_BY(mu) = false;
  std::thread reader, writer;

  void fail(Status why) {
    {
      MutexLock lock(mu);
      if (broken.ok()) broken = std::move(why);
    }
    cv.notify_all();
  }
  void shutdown_all() {
    boost::system::error_code ec;
    ::shutdown(acceptor.native_handle(), SHUT_RDWR);
    ::shutdown(next.native_handle(), SHUT_RDWR);
    ::shutdown(prev.native_handle(), SHUT_RDWR);
    (void)ec;
  }
  void read_loop();
  void write_loop();
  Status listen();
  Result<tcp::socket> dial(const std::string& address);
  Status rendezvous();
  Status link_ring(const std::string& next_address);
};

Status TcpRing::State::listen() {
  const size_t colon = options.listen.rfind(':');
  const std::string host = options.listen.substr(0, colon == std::string::npos ? 0 : colon);
  uint16_t port = 0;
  if (!options.listen.ends_with(":0")) {
    KEEL_ASSIGN_OR_RETURN(const net::HostPort hp, net::parse_host_port(options.listen));
    port = hp.port;
  }
  boost::system::error_code ec;
  const auto addr = asio::ip::make_address(host, ec);
  if (ec)
    return Status::invalid_argument("context-parallel ring: bad listen address " + options.listen);
  acceptor.open(addr.is_v6() ? tcp::v6() : tcp::v4(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(tcp::endpoint(addr, port), ec);
  if (!ec) acceptor.listen(64, ec);
  if (ec) {
    return Status::unavailable("context-parallel ring: cannot listen on " + options.listen + ": " +
                               ec.message());
  }
  address = host + ":" + std::to_string(acceptor.local_endpoint().port());
  return Status();
}

Result<tcp::socket> TcpRing::State::dial(const std::string& address_to) {
  KEEL_ASSIGN_OR_RETURN(const net::HostPort hp, net::parse_host_port(address_to));
  boost::system::error_code ec;
  const auto addr = asio::ip::make_address(hp.host, ec);
  if (ec) return Status::invalid_argument("context-parallel ring: bad host " + hp.host);
  tcp::socket s(io);
  // A member that has not bound yet refuses: try again until the watchdog's deadline.
  for (int attempt = 0;; ++attempt) {
    s.connect(tcp::endpoint(addr, hp.port), ec);
    if (!ec || attempt >= 100) break;
    s.close();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (ec) {
    return Status::unavailable("context-parallel ring: cannot reach " + address_to + ": " +
                               ec.message());
  }
  s.set_option(tcp::no_delay(true), ec);
  return s;
}

Status TcpRing::State::rendezvous() {
  const int n = options.size, r = options.rank;
  if (r > 0) {
    KEEL_ASSIGN_OR_RETURN(tcp::socket s, dial(options.join));
    KEEL_TRY(send_json(s, {{"v", kRingVersion}, {"join", r}, {"size", n}, {"addr", address}}));
    KEEL_ASSIGN_OR_RETURN(const Json reply, read_json(s));
    if (!reply.contains("next") || !reply["next"].is_string()) {
      return Status::corrupt("context-parallel ring: member 0 sent no next address");
    }
    return link_ring(reply["next"].get<std::string>());
  }
  std::vector<std::string> addrs(static_cast<size_t>(n));
  std::vector<std::unique_ptr<tcp::socket>> by_rank(static_cast<size_t>(n));
  addrs[0] = address;
  for (int i = 1; i < n; ++i) {
    boost::system::error_code ec;
    auto s = std::make_unique<tcp::socket>(acceptor.accept(ec));
    if (ec) return Status::unavailable("context-parallel ring: members did not all join in time");
    KEEL_ASSIGN_OR_RETURN(const Json j, read_json(*s));
    const int who = j.value("join", -1);
    if (j.value("size", -1) != n || who < 1 || who >= n || by_rank[static_cast<size_t>(who)]) {
      return Status::corrupt("context-parallel ring: a join from rank " + std::to_string(who) +
                             " of a group of " + std::to_string(j.value("size", -1)) +
                             " does not fit this group of " + std::to_string(n));
    }
    addrs[static_cast<size_t>(who)] = j.value("addr", "");
    by_rank[static_cast<size_t>(who)] = std::move(s);
  }
  for (int who = 1; who < n; ++who) {
    const std::string& next_addr = addrs[static_cast<size_t>((who + 1) % n)];
    KEEL_TRY(
        send_json(*by_rank[static_cast<size_t>(who)], {{"v", kRingVersion}, {"next", next_addr}}));
  }
  return link_ring(addrs[1]);
}

Status TcpRing::State::link_ring(const std::string& next_address) {
  const int n = options.size, r = options.rank;
  KEEL_ASSIGN_OR_RETURN(next, dial(next_address));
  KEEL_TRY(send_json(next, {{"v", kRingVersion}, {"ring", r}, {"size", n}}));
  boost::system::error_code ec;
  prev = acceptor.accept(ec);
  if (ec) return Status::unavailable("context-parallel ring: the previous member did not connect");
  prev.set_option(tcp::no_delay(true), ec);
  KEEL_ASSIGN_OR_RETURN(const Json j, read_json(prev));
  const int want = (r + n - 1) % n;
  if (j.value("ring", -1) != want || j.value("size", -1) != n) {
    return Status::corrupt("context-parallel ring: member " + std::to_string(r) +
                           " expected rank " + std::to_string(want) + " of " + std::to_string(n) +
                           " before it, got " + j.dump());
  }
  return Status();
}

void TcpRing::State::read_loop() {
  for (;;) {
    Result<std::vector<std::byte>> frame = read_frame(prev, options.max_message_bytes);
    if (!frame.ok()) {
      fail(frame.status());
      return;
    }
    {
      MutexLock lock(mu);
      inbox.push_back(std::make_shared<const std::vector<std::byte>>(std::move(*frame)));
    }
    cv.notify_all();
  }
}

void TcpRing::State::write_loop() {
  for (;;) {
    model::CpMessage msg;
    {
      UniqueLock lock(mu);
      cv.wait(lock.native(), [&]() KEEL_NO_THREAD_SAFETY_ANALYSIS {
        return stopping || !broken.ok() || !outbox.empty();
      });
      if (stopping || !broken.ok()) return;
      msg = std::move(outbox.front());
      outbox.pop_front();
      writing = true;
    }
    const Status st = write_frame(next, msg->data(), msg->size());
    {
      MutexLock lock(mu);
      writing = false;
    }
    if (!st.ok()) {
      fail(st);
      return;
    }
    cv.notify_all();
  }
}

Result<std::unique_ptr<TcpRing>> TcpRing::connect(
    const TcpRingOptions& options, const std::function<void(uint16_t port)>& on_listening) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size ||
      (options.rank > 0 && options.join.empty())) {
    return Status::invalid_argument("context-parallel ring: rank " + std::to_string(options.rank) +
                                    " of " + std::to_string(options.size) +
                                    (options.rank > 0 && options.join.empty()
                                         ? " needs member 0's address"
                                         : " is outside the group"));
  }
  auto state = std::make_unique<State>();
  state->options = options;
  if (options.size > 1) {
    KEEL_TRY(state->listen());
    if (on_listening) on_listening(state->acceptor.local_endpoint().port());
    // The watchdog: at the deadline, every blocking start-up call fails at once.
    Mutex done_mu;
    std::condition_variable done_cv;
    bool done = false, timed_out = false;
    std::thread watchdog([&] {
      UniqueLock lock(done_mu);
      if (!done_cv.wait_for(lock.native(), options.timeout,
                            [&]() KEEL_NO_THREAD_SAFETY_ANALYSIS { return done; })) {
        timed_out = true;
        state->shutdown_all();
      }
    });
    Status st = state->rendezvous();
    {
      MutexLock lock(done_mu);
      done = true;
    }
    done_cv.notify_all();
    watchdog.join();
    if (timed_out && !st.ok()) {
      st = Status::unavailable("context-parallel ring: start-up took longer than " +
                               std::to_string(options.timeout.count()) + " ms (" + st.message() +
                               ")");
    }
    KEEL_TRY(st);
    State* raw = state.get();
    state->reader = std::thread([raw] { raw->read_loop(); });
    state->writer = std::thread([raw] { raw->write_loop(); });
  } else if (on_listening) {
    on_listening(0);
  }
  return std::unique_ptr<TcpRing>(new TcpRing(std::move(state)));
}

TcpRing::TcpRing(std::unique_ptr<State> state) : state_(std::move(state)) {}

TcpRing::~TcpRing() {
  {
    MutexLock lock(state_->mu);
    state_->stopping = true;
  }
  state_->cv.notify_all();
  state_->shutdown_all();
  if (state_->reader.joinable()) state_->reader.join();
  if (state_->writer.joinable()) state_->writer.join();
}

int TcpRing::rank() const { return state_->options.rank; }
int TcpRing::size() const { return state_->options.size; }

Status TcpRing::send_next(model::CpMessage msg) {
  {
    MutexLock lock(state_->mu);
    if (!state_->broken.ok()) return state_->broken;
    state_->outbox.push_back(std::move(msg));
  }
  state_->cv.notify_all();
  return Status();
}

Result<model::CpMessage> TcpRing::recv_prev() {
  State& s = *state_;
  UniqueLock lock(s.mu);
  s.cv.wait_for(lock.native(), s.options.timeout, [&]() KEEL_NO_THREAD_SAFETY_ANALYSIS {
    return !s.inbox.empty() || !s.broken.ok();
  });
  if (!s.inbox.empty()) {
    model::CpMessage msg = std::move(s.inbox.front());
    s.inbox.pop_front();
    return msg;
  }
  if (!s.broken.ok()) return s.broken;
  return Status::unavailable("context-parallel ring: nothing from the previous member in " +
                             std::to_string(s.options.timeout.count()) + " ms");
}

Status TcpRing::flush() {
  State& s = *state_;
  UniqueLock lock(s.mu);
  s.cv.wait_for(lock.native(), s.options.timeout, [&]() KEEL_NO_THREAD_SAFETY_ANALYSIS {
    return (s.outbox.empty() && !s.writing) || !s.broken.ok();
  });
  if (!s.broken.ok()) return s.broken;
  if (!s.outbox.empty() || s.writing) {
    return Status::unavailable("context-parallel ring: sending took longer than " +
                               std::to_string(s.options.timeout.count()) + " ms");
  }
  return Status();
}

}  // namespace keel::cp
