// UcxChannel: connection set-up, sends and receives on the UCX thread, the inbox the owner's
// waits take frames from.
#include "ep/ucx_channel.h"

#include <netinet/in.h>

#include <cstring>
#include <deque>
#include <unordered_set>
#include <vector>

#include "core/log.h"
#include "core/mutex.h"
#include "ep/expert_frame.h"
#include "net/host_port.h"
#include "net/ucx_worker.h"

namespace keel::ep {
namespace {

constexpr unsigned kEpAmId = 0x4550;                   // "EP"
constexpr size_t kMaxFrameBytes = size_t{1} << 30;     // larger messages are dropped
constexpr size_t kInitialOutBytes = size_t{64} << 10;  // room for hello, ready, error and bye

}  // namespace

struct UcxChannel::Impl {
  bool leader = false;
  std::string peer;  // for messages: the member's address, or "leaders"
  std::unique_ptr<net::UcxWorker> worker;

  // The UCX thread's.
  ucp_ep_h ep = nullptr;  // leader: to the member
  ucp_listener_h listener = nullptr;
  std::unordered_set<ucp_ep_h> conns;  // member: the leaders' live connections
  std::vector<void*> closing;          // endpoint closes in flight
  int receives = 0;                    // rendezvous receives in flight
  uint16_t port = 0;

  // Frames received, not yet taken.
  struct Inbound {
    std::vector<std::byte> bytes;
    ucp_ep_h from = nullptr;
  };
  Mutex mu;
  std::deque<Inbound> inbox KEEL_GUARDED_BY(mu);
  std::vector<std::vector<std::byte>> spare KEEL_GUARDED_BY(mu);  // buffers to reuse
  Status failure KEEL_GUARDED_BY(mu);                             // leader: the connection's
  std::atomic<uint32_t> arrived{0};
  std::atomic<bool> broken{false};
  std::atomic<int> leaders_seen{0};  // member: connections accepted so far
  std::atomic<int> leaders_open{0};  // member: of those, not failed

  // The owner's: the frame taken last, the outgoing mailbox.
  Inbound current;
  uint32_t taken = 0;
  std::vector<std::byte> out = std::vector<std::byte>(kInitialOutBytes);
  uint32_t posted = 0;

  struct PendingReceive {
    Impl* impl = nullptr;
    Inbound frame;
  };
  struct Outbound {
    Impl* impl = nullptr;
    std::vector<std::byte> bytes;
    ucp_ep_h to = nullptr;
  };

  std::vector<std::byte> take_buffer(size_t n) {
    std::vector<std::byte> b;
    {
      MutexLock lock(mu);
      if (!spare.empty()) {
        b = std::move(spare.back());
        spare.pop_back();
      }
    }
    b.resize(n);
    return b;
  }

  void deliver(Inbound frame) {
    {
      MutexLock lock(mu);
      inbox.push_back(std::move(frame));
    }
    arrived.fetch_add(1, std::memory_order_release);
    wake_post_waiters(arrived);
  }

  void fail(const Status& why) {
    {
      MutexLock lock(mu);
      if (failure.ok()) failure = why;
    }
    broken.store(true, std::memory_order_release);
    wake_post_waiters(arrived);
  }

  void close_ep(ucp_ep_h e, bool force) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    void* req = ucp_ep_close_nbx(e, &param);
    if (UCS_PTR_IS_PTR(req)) closing.push_back(req);
  }

  static void on_ep_error(void* arg, ucp_ep_h e, ucs_status_t status) {
    auto* impl = static_cast<Impl*>(arg);
    if (impl->leader) {
      if (e != impl->ep) return;
      impl->fail(net::ucx_status(("connection to expert member " + impl->peer).c_str(), status));
      impl->ep = nullptr;
    } else if (impl->conns.erase(e) == 0) {
      return;
    } else {
      impl->leaders_open.fetch_sub(1, std::memory_order_release);
    }
    impl->close_ep(e, /*force=*/true);
  }

  static void on_connection(ucp_conn_request_h request, void* arg) {
    auto* impl = static_cast<Impl*>(arg);
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.conn_request = request;
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &Impl::on_ep_error;
    params.err_handler.arg = impl;
    ucp_ep_h e = nullptr;
    if (ucp_ep_create(impl->worker->handle(), &params, &e) != UCS_OK) {
      (void)ucp_listener_reject(impl->listener, request);
      return;
    }
    impl->conns.insert(e);
    impl->leaders_open.fetch_add(1, std::memory_order_release);
    impl->leaders_seen.fetch_add(1, std::memory_order_release);
  }

  static void on_payload(void* request, ucs_status_t status, size_t /*length*/, void* user_data) {
    auto* p = static_cast<PendingReceive*>(user_data);
    --p->impl->receives;
    if (status == UCS_OK) p->impl->deliver(std::move(p->frame));
    delete p;
    ucp_request_free(request);
  }

  static ucs_status_t on_am(void* arg, const void* /*header*/, size_t /*header_length*/, void* data,
                            size_t length, const ucp_am_recv_param_t* param) {
    auto* impl = static_cast<Impl*>(arg);
    const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    if (length > kMaxFrameBytes) {
      KEEL_LOG_WARN("expert channel: dropped a {}-byte message", length);
      if (rndv) ucp_am_data_release(impl->worker->handle(), data);
      return UCS_OK;
    }
    Inbound frame;
    frame.from =
        (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0 ? param->reply_ep : impl->ep;
    frame.bytes = impl->take_buffer(length);
    if (!rndv) {
      std::memcpy(frame.bytes.data(), data, length);
      impl->deliver(std::move(frame));
      return UCS_OK;
    }
    auto* pending = new PendingReceive{impl, std::move(frame)};
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rp.cb.recv_am = &Impl::on_payload;
    rp.user_data = pending;
    void* req = ucp_am_recv_data_nbx(impl->worker->handle(), data, pending->frame.bytes.data(),
                                     length, &rp);
    if (req == nullptr) {
      impl->deliver(std::move(pending->frame));
      delete pending;
    } else if (UCS_PTR_IS_ERR(req)) {
      delete pending;
    } else {
      ++impl->receives;
    }
    return UCS_OK;
  }

  static void on_sent(void* request, ucs_status_t status, void* user_data) {
    auto* o = static_cast<Outbound*>(user_data);
    if (status != UCS_OK && o->impl->leader) o->impl->fail(net::ucx_status("am_send", status));
    delete o;
    ucp_request_free(request);
  }

  // On the UCX thread: sends o (owned) unless its connection is gone. A leader's goes to its
  // member, a member's to the connection the request came on.
  void send(Outbound* o) {
    if (leader) o->to = ep;
    const bool live = leader ? ep != nullptr : conns.contains(o->to);
    if (!live) {
      delete o;  // leader: already failed; member: that leader is gone
      return;
    }
    ucp_request_param_t param{};
    param.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    param.cb.send = &Impl::on_sent;
    param.user_data = o;
    param.flags = UCP_AM_SEND_FLAG_REPLY;  // the member answers on this connection
    void* req =
        ucp_am_send_nbx(o->to, kEpAmId, nullptr, 0, o->bytes.data(), o->bytes.size(), &param);
    if (UCS_PTR_IS_PTR(req)) return;
    if (UCS_PTR_IS_ERR(req) && leader) fail(net::ucx_status("am_send", UCS_PTR_STATUS(req)));
    delete o;
  }

  // The owner's post: copies the frame in `out` and hands it to the UCX thread.
  void post(ucp_ep_h to) {
    auto f = decode_frame(out);
    if (!f.ok()) {
      KEEL_LOG_ERROR("expert channel: posted a malformed frame: {}", f.error().to_string());
      return;
    }
    const size_t n = kFrameHeaderBytes + f->body.size();
    auto* o = new Outbound{this, std::vector<std::byte>(out.begin(), out.begin() + n), to};
    ++posted;
    worker->post([this, o] { send(o); });
  }

  Result<uint32_t> wait(uint32_t seen, std::chrono::milliseconds timeout,
                        const std::function<bool()>& alive) {
    if (taken != seen) return taken;
    const auto up = [&] { return !broken.load(std::memory_order_acquire) && (!alive || alive()); };
    auto r = wait_for_post(arrived, taken, timeout, up);
    if (!r.ok()) {
      if (broken.load(std::memory_order_acquire)) {
        MutexLock lock(mu);
        return failure;
      }
      return r.error();
    }
    MutexLock lock(mu);
    if (inbox.empty()) return Status::internal("expert channel: arrival without a frame");
    if (!current.bytes.empty()) spare.push_back(std::move(current.bytes));
    current = std::move(inbox.front());
    inbox.pop_front();
    return ++taken;
  }

  Status set_handler() {
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = kEpAmId;
    hp.cb = &Impl::on_am;
    hp.arg = this;
    const ucs_status_t s = ucp_worker_set_am_recv_handler(worker->handle(), &hp);
    if (s != UCS_OK) return net::ucx_status("set_am_recv_handler", s);
    return Status();
  }

  // Leader, on the UCX thread: the endpoint, and a flush that completes once it is wired up.
  Status open(const sockaddr_storage& addr, std::chrono::milliseconds timeout) {
    KEEL_TRY(set_handler());
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
    params.sockaddr.addrlen = sizeof(sockaddr_in);
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &Impl::on_ep_error;
    params.err_handler.arg = this;
    ucs_status_t s = ucp_ep_create(worker->handle(), &params, &ep);
    if (s != UCS_OK) {
      ep = nullptr;
      return net::ucx_status("ep_create", s);
    }
    ucp_request_param_t fp{};
    void* req = ucp_ep_flush_nbx(ep, &fp);
    if (UCS_PTR_IS_ERR(req)) return net::ucx_status("connect", UCS_PTR_STATUS(req));
    if (req == nullptr) return Status();
    s = UCS_INPROGRESS;
    worker->progress_until([&] { return (s = ucp_request_check_status(req)) != UCS_INPROGRESS; },
                           timeout);
    ucp_request_free(req);
    if (s == UCS_INPROGRESS) return Status::unavailable("expert member " + peer + ": no answer");
    if (s != UCS_OK) return net::ucx_status(("connect to expert member " + peer).c_str(), s);
    if (broken.load()) {
      MutexLock lock(mu);
      return failure;
    }
    return Status();
  }

  // Member, on the UCX thread.
  Status bind(const sockaddr_storage& addr) {
    KEEL_TRY(set_handler());
    ucp_listener_params_t lp{};
    lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
    lp.sockaddr.addrlen = sizeof(sockaddr_in);
    lp.conn_handler.cb = &Impl::on_connection;
    lp.conn_handler.arg = this;
    ucs_status_t s = ucp_listener_create(worker->handle(), &lp, &listener);
    if (s != UCS_OK) return net::ucx_status("listener_create", s);
    ucp_listener_attr_t attr{};
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    s = ucp_listener_query(listener, &attr);
    if (s != UCS_OK) return net::ucx_status("listener_query", s);
    port = ntohs(reinterpret_cast<const sockaddr_in*>(&attr.sockaddr)->sin_port);
    return Status();
  }

  void reap_closing() {
    std::erase_if(closing, [](void* req) {
      if (ucp_request_check_status(req) == UCS_INPROGRESS) return false;
      ucp_request_free(req);
      return true;
    });
  }

  // On the UCX thread: no new connections; receives in flight finish; endpoints close in flush
  // mode (frames already posted, a goodbye among them, go out first); bounded waits.
  void shutdown() {
    if (listener != nullptr) ucp_listener_destroy(listener);
    listener = nullptr;
    worker->progress_until([&] { return receives == 0; }, std::chrono::milliseconds(2000));
    if (ep != nullptr) close_ep(ep, /*force=*/false);
    ep = nullptr;
    for (ucp_ep_h e : conns) close_ep(e, /*force=*/false);
    conns.clear();
    worker->progress_until(
        [&] {
          reap_closing();
          return closing.empty();
        },
        std::chrono::milliseconds(2000));
    for (void* req : closing) ucp_request_free(req);
    closing.clear();
    worker->drain(std::chrono::milliseconds(20), std::chrono::milliseconds(1000));
  }

  static Result<std::unique_ptr<Impl>> start(bool leader, std::string peer) {
    auto impl = std::make_unique<Impl>();
    impl->leader = leader;
    impl->peer = std::move(peer);
    Impl* raw = impl.get();
    KEEL_ASSIGN_OR_RETURN(impl->worker, net::UcxWorker::start(
                                            leader ? "keel-ep-lead" : "keel-ep-member",
                                            [raw] {
                                              raw->reap_closing();
                                              return std::chrono::milliseconds(100);
                                            },
                                            /*wakeup=*/true));
    return impl;
  }
};

UcxChannel::UcxChannel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<UcxChannel>> UcxChannel::connect(const std::string& address,
                                                        size_t request_bytes,
                                                        std::chrono::milliseconds timeout) {
  KEEL_ASSIGN_OR_RETURN(const net::HostPort hp, net::parse_host_port(address));
  KEEL_ASSIGN_OR_RETURN(const sockaddr_storage addr, net::resolve_ipv4(hp.host, hp.port));
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, Impl::start(true, address));
  impl->out.resize(std::max(request_bytes, kInitialOutBytes));
  Impl* raw = impl.get();
  Status s;
  raw->worker->run_sync([&] { s = raw->open(addr, timeout); });
  std::unique_ptr<UcxChannel> ch(new UcxChannel(std::move(impl)));
  if (!s.ok()) return s;  // the destructor shuts the worker down
  return ch;
}

Result<std::unique_ptr<UcxChannel>> UcxChannel::listen(const std::string& host, uint16_t port) {
  KEEL_ASSIGN_OR_RETURN(const sockaddr_storage addr, net::resolve_ipv4(host, port));
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, Impl::start(false, "leaders"));
  Impl* raw = impl.get();
  Status s;
  raw->worker->run_sync([&] { s = raw->bind(addr); });
  std::unique_ptr<UcxChannel> ch(new UcxChannel(std::move(impl)));
  if (!s.ok()) return s;
  return ch;
}

UcxChannel::~UcxChannel() {
  Impl* raw = impl_.get();
  raw->worker->run_sync([raw] { raw->shutdown(); });
  raw->worker->stop();
}

uint16_t UcxChannel::port() const { return impl_->port; }

bool UcxChannel::leaders_gone() const {
  return !impl_->leader && impl_->leaders_open.load(std::memory_order_acquire) == 0 &&
         impl_->leaders_seen.load(std::memory_order_acquire) > 0;
}

std::span<std::byte> UcxChannel::request() {
  return impl_->leader ? std::span<std::byte>(impl_->out)
                       : std::span<std::byte>(impl_->current.bytes);
}

std::span<std::byte> UcxChannel::reply() {
  return impl_->leader ? std::span<std::byte>(impl_->current.bytes)
                       : std::span<std::byte>(impl_->out);
}

void UcxChannel::post_request() { impl_->post(nullptr); }

void UcxChannel::post_reply() { impl_->post(impl_->current.from); }

Result<uint32_t> UcxChannel::wait_request(uint32_t seen, std::chrono::milliseconds timeout,
                                          const std::function<bool()>& alive) {
  return impl_->wait(seen, timeout, alive);
}

Result<uint32_t> UcxChannel::wait_reply(uint32_t seen, std::chrono::milliseconds timeout,
                                        const std::function<bool()>& alive) {
  return impl_->wait(seen, timeout, alive);
}

uint32_t UcxChannel::request_seq() const { return impl_->leader ? impl_->posted : impl_->taken; }

uint32_t UcxChannel::reply_seq() const { return impl_->leader ? impl_->taken : impl_->posted; }

Status UcxChannel::reserve(size_t request_bytes, size_t reply_bytes) {
  if (request_bytes > kMaxFrameBytes || reply_bytes > kMaxFrameBytes) {
    return Status::resource_exhausted("expert channel: frames over 1 GiB");
  }
  if (!impl_->leader) impl_->out.resize(std::max(impl_->out.size(), reply_bytes));
  return Status();
}

}  // namespace keel::ep
