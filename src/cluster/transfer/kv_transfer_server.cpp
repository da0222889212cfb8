// KvTransferServer: listener, per-connection idle timeouts and the frame checks (see
// kv_transfer_server.h). Every function below but the public ones runs on the UCX thread.
#include "cluster/transfer/kv_transfer_server.h"

#include <netinet/in.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "cluster/transfer/kv_batch_frame.h"
#include "core/mutex.h"
#include "net/ucx_worker.h"

namespace keel::cluster {

using Clock = std::chrono::steady_clock;

Status KvTransferServerOptions::validate() const {
  if (idle_timeout.count() <= 0) return Status::invalid_argument("idle_timeout must be > 0");
  if (payload_bytes > kKvFrameMaxPayloadBytes) {
    return Status::invalid_argument("payload_bytes exceeds the frame limit");
  }
  return Status::ok_status();
}

KvBlockSink tier_store_sink(kv::TierStore* store) {
  return [store](const KvFrameHeader& header, std::span<const std::byte> payload) {
    (void)store->put(header.block_hash, payload, nullptr);  // a refused block is just not cached
  };
}

namespace {

// Payload bytes received and not yet delivered beyond which the server holds new rendezvous
// frames back (their receive starts once the pipeline catches up): a slow sink bounds the memory.
constexpr size_t kMaxBacklogBytes = size_t{64} << 20;
constexpr uint64_t kMaxRendezvousBytes =
    std::max({kKvFrameMaxPayloadBytes, kKvBatchMaxPayloadBytes, kWeightsFrameMaxPayloadBytes});

}  // namespace

struct KvTransferServer::Impl {
  KvTransferServerOptions options;
  KvReceivePipeline::Sinks sinks;  // until start_impl hands them to the pipeline
  KvPayloadPlacer placer;          // the KV channel's (one-block frames)
  WeightsPayloadPlacer weights_placer;
  std::unique_ptr<KvReceivePipeline> pipeline;  // checksums and sinks, off the UCX thread
  std::unique_ptr<net::UcxWorker> worker;
  ucp_listener_h listener = nullptr;
  uint16_t port = 0;

  // Rendezvous payload being received.
  struct PendingReceive {
    Impl* impl = nullptr;
    ReceivedHeader header;
    uint64_t ticket = 0;         // its place in the pipeline (not for a discarded frame)
    PayloadBuffer buffer;        // from the pipeline's pool; empty when placed
    std::byte* dst = nullptr;    // where the payload lands
    std::shared_ptr<void> keep;  // holds a placer's destination until delivered
    size_t length = 0;
    void* data = nullptr;  // UCX's rendezvous descriptor, until the receive starts
    void* request = nullptr;
    bool discard = false;  // a rejected frame: received only to complete the rendezvous
  };
  std::unordered_map<ucp_ep_h, Clock::time_point> conns;  // connection → its last frame
  std::unordered_set<PendingReceive*> receives;           // rendezvous receives in flight
  std::deque<PendingReceive*> held;  // admitted frames whose receive waits for the backlog
  size_t held_bytes = 0;
  std::atomic<bool> holding{false};  // held is not empty (read by the pipeline's thread)
  std::vector<void*> closing;        // endpoint close requests in flight
  bool stopping = false;             // shutdown began: frames from now on are received and dropped

  mutable Mutex stats_mu;
  KvTransferServerStats stats KEEL_GUARDED_BY(stats_mu);

  template <typename F>
  void count(F&& f) {
    MutexLock lock(stats_mu);
    f(stats);
  }

  // force: drop what is queued on it (a failed or idle connection); else flush it first (shutdown
  // with a live peer: queued transport work completes, so none is left when the worker goes).
  void close_ep(ucp_ep_h ep, bool force = true) {
    if (conns.erase(ep) == 0) return;
    count([](KvTransferServerStats& s) { --s.connections_open; });
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    void* req = ucp_ep_close_nbx(ep, &param);
    if (UCS_PTR_IS_PTR(req)) closing.push_back(req);
  }

  // A KV-channel header (one block or a batch) → its fields, when every check passes; counts the
  // failed check otherwise.
  std::optional<ReceivedHeader> admit_kv(std::span<const std::byte> header_bytes, size_t length) {
    const auto malformed = [this]() -> std::optional<ReceivedHeader> {
      count([](KvTransferServerStats& s) { ++s.rejected_malformed; });
      return std::nullopt;
    };
    const auto fits = [&](const KvFrameHeader& b) {
      return options.payload_bytes == 0 || b.payload_bytes == options.payload_bytes;
    };
    kv::BlockHash identity;
    ReceivedHeader header;
    if (kv_header_magic(header_bytes) == kKvBatchMagic) {
      auto decoded = decode_batch_header(header_bytes);
      if (!decoded.ok() || decoded->payload_bytes() != length ||
          !std::all_of(decoded->blocks.begin(), decoded->blocks.end(), fits)) {
        return malformed();
      }
      identity = decoded->kv_identity;
      header = std::move(*decoded);
    } else {
      auto decoded = decode_frame_header(header_bytes);
      if (!decoded.ok() || decoded->payload_bytes != length || !fits(*decoded)) return malformed();
      identity = decoded->kv_identity;
      header = *decoded;
    }
    if (identity != options.kv_identity) {
      count([](KvTransferServerStats& s) { ++s.rejected_identity; });
      return std::nullopt;
    }
    return header;
  }

  // Header checks before any payload is received (`am_id`: the channel it came on); nothing: drop
  // the frame.
  std::optional<ReceivedHeader> admit(unsigned am_id, std::span<const std::byte> header_bytes,
                                      size_t length) {
    if (am_id == transfer_am_id(options.channel) && options.channel == TransferChannel::kKvBlocks) {
      return admit_kv(header_bytes, length);
    }
    if (am_id == transfer_am_id(options.channel)) {
      auto decoded = decode_weights_header(header_bytes);
      if (decoded.ok() && decoded->payload_bytes == length) return ReceivedHeader{*decoded};
    }
    count([](KvTransferServerStats& s) { ++s.rejected_malformed; });
    return std::nullopt;
  }

  // Where an admitted rendezvous payload goes: the channel's placer's choice, or none (a batch
  // always lands in the pipeline's buffers).
  PayloadPlacement place(const ReceivedHeader& header) {
    if (const auto* kv = std::get_if<KvFrameHeader>(&header)) {
      return placer ? placer(*kv) : PayloadPlacement{};
    }
    if (const auto* w = std::get_if<WeightsFrameHeader>(&header)) {
      return weights_placer ? weights_placer(*w) : PayloadPlacement{};
    }
    return {};
  }

  // Received bytes the pipeline has not delivered yet, beyond those held back.
  [[nodiscard]] size_t receiving_bytes() const { return pipeline->backlog_bytes() - held_bytes; }

  ucs_status_t on_message(unsigned am_id, const void* header_ptr, size_t header_length, void* data,
                          size_t length, const ucp_am_recv_param_t* param) {
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0) {
      auto it = conns.find(param->reply_ep);
      if (it != conns.end()) it->second = Clock::now();
    }
    const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    std::optional<ReceivedHeader> header =
        admit(am_id, {static_cast<const std::byte*>(header_ptr), header_length}, length);
    if (!rndv) {  // eager: the bytes are here only during this call
      if (header && !stopping) {
        ReceivedFrame frame{std::move(*header), pipeline->take_buffer(length), {}, {}};
        if (length > 0) std::memcpy(frame.buffer.bytes.get(), data, length);
        frame.payload = {frame.buffer.bytes.get(), length};
        pipeline->complete(pipeline->reserve(length), std::move(frame));
      }
      return UCS_OK;
    }
    if (!header && length > kMaxRendezvousBytes) {
      ucp_am_data_release(worker->handle(), data);  // declines it (UCX 1.13 may leak a buffer)
      return UCS_OK;
    }
    auto* pending = new PendingReceive{};
    pending->impl = this;
    pending->length = length;
    pending->data = data;
    // A rejected rendezvous frame is still received, into a buffer that is then dropped:
    // declining it with ucp_am_data_release leaks UCX's receive descriptors in 1.13.
    pending->discard = !header || stopping;
    if (pending->discard) {
      start_receive(pending);
      return UCS_OK;
    }
    pending->header = std::move(*header);
    const bool hold = !held.empty() || receiving_bytes() >= kMaxBacklogBytes;
    pending->ticket = pipeline->reserve(length);
    if (hold) {
      held.push_back(pending);  // its place in the order is kept; the receive starts later
      held_bytes += length;
      holding = true;
      return UCS_INPROGRESS;
    }
    start_receive(pending);
    return UCS_OK;
  }

  // Starts the receive of a rendezvous payload (on a completion or failure at once, settles it).
  void start_receive(PendingReceive* pending) {
    if (!pending->discard) {
      PayloadPlacement at = place(pending->header);
      pending->dst = at.dst;
      pending->keep = std::move(at.keep);
    }
    if (pending->dst == nullptr) {
      pending->buffer = pipeline->take_buffer(pending->length);
      pending->dst = pending->buffer.bytes.get();
    }
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rp.cb.recv_am = &Impl::on_payload;
    rp.user_data = pending;
    void* req =
        ucp_am_recv_data_nbx(worker->handle(), pending->data, pending->dst, pending->length, &rp);
    pending->data = nullptr;
    if (req == nullptr) {  // completed at once
      settle(pending, UCS_OK);
    } else if (UCS_PTR_IS_ERR(req)) {
      settle(pending, UCS_PTR_STATUS(req));
    } else {
      pending->request = req;
      receives.insert(pending);
    }
  }

  // A receive ended: its frame goes to the pipeline (or its place is given up); frees the record.
  void settle(PendingReceive* pending, ucs_status_t status) {
    if (pending->discard) {
      // nothing to deliver
    } else if (status == UCS_OK) {
      ReceivedFrame frame{std::move(pending->header),
                          std::move(pending->buffer),
                          {pending->dst, pending->length},
                          std::move(pending->keep)};
      pipeline->complete(pending->ticket, std::move(frame));
    } else {
      count([](KvTransferServerStats& s) { ++s.receive_errors; });
      pipeline->abandon(pending->ticket);
    }
    delete pending;
  }

  static void on_payload(void* request, ucs_status_t status, size_t /*length*/, void* user_data) {
    auto* pending = static_cast<PendingReceive*>(user_data);
    Impl* impl = pending->impl;
    impl->receives.erase(pending);
    impl->settle(pending, status);
    ucp_request_free(request);
  }

  // Starts the held receives the backlog now allows (all of them, as discards, once stopping).
  void resume_held() {
    while (!held.empty() && (stopping || receiving_bytes() < kMaxBacklogBytes)) {
      PendingReceive* pending = held.front();
      held.pop_front();
      held_bytes -= pending->length;
      if (stopping) {
        pipeline->abandon(pending->ticket);
        pending->discard = true;
      }
      start_receive(pending);
    }
    holding = !held.empty();
  }

  template <unsigned kAmId>
  static ucs_status_t on_am(void* arg, const void* header, size_t header_length, void* data,
                            size_t length, const ucp_am_recv_param_t* param) {
    return static_cast<Impl*>(arg)->on_message(kAmId, header, header_length, data, length, param);
  }

  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t /*status*/) {
    static_cast<Impl*>(arg)->close_ep(ep);  // the peer is gone or the connection failed
  }

  static void on_connection(ucp_conn_request_h request, void* arg) {
    auto* impl = static_cast<Impl*>(arg);
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.conn_request = request;
    params.err_mode = kKvTransferErrMode;
    params.err_handler.cb = &Impl::on_ep_error;
    params.err_handler.arg = impl;
    ucp_ep_h ep = nullptr;
    if (ucp_ep_create(impl->worker->handle(), &params, &ep) != UCS_OK) {
      (void)ucp_listener_reject(impl->listener, request);  // the request must not linger
      return;
    }
    impl->conns[ep] = Clock::now();
    impl->count([](KvTransferServerStats& s) {
      ++s.connections_accepted;
      ++s.connections_open;
    });
  }

  // The progress thread's tick: held receives, idle timeouts and finished close requests.
  std::chrono::milliseconds tick() {
    resume_held();
    const auto now = Clock::now();
    std::vector<ucp_ep_h> idle;
    for (const auto& [ep, last] : conns) {
      if (now - last > options.idle_timeout) idle.push_back(ep);
    }
    for (ucp_ep_h ep : idle) {
      count([](KvTransferServerStats& s) { ++s.connections_timed_out; });
      close_ep(ep);
    }
    reap_closing();
    // Polled (see ucx_worker.h): a frame on an open connection waits at most 1 ms for the thread.
    return std::chrono::milliseconds(conns.empty() ? 10 : 1);
  }

  void reap_closing() {
    std::erase_if(closing, [](void* req) {
      if (ucp_request_check_status(req) == UCS_INPROGRESS) return false;
      ucp_request_free(req);
      return true;
    });
  }

  Status listen() {
    KEEL_ASSIGN_OR_RETURN(sockaddr_storage addr, net::resolve_ipv4(options.host, options.port));
    // Both channels' ids: a frame of the other channel is received and dropped, not left to UCX.
    ucs_status_t s = UCS_OK;
    for (const auto& [id, cb] : {std::pair{kKvFrameAmId, &Impl::on_am<kKvFrameAmId>},
                                 std::pair{kWeightsFrameAmId, &Impl::on_am<kWeightsFrameAmId>}}) {
      ucp_am_handler_param_t hp{};
      hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_ARG;
      hp.id = id;
      hp.cb = cb;
      hp.arg = this;
      s = ucp_worker_set_am_recv_handler(worker->handle(), &hp);
      if (s != UCS_OK) return net::ucx_status("set_am_recv_handler", s);
    }
    ucp_listener_params_t lp{};
    lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
    lp.sockaddr.addrlen = sizeof(sockaddr_in);
    lp.conn_handler.cb = &Impl::on_connection;
    lp.conn_handler.arg = this;
    s = ucp_listener_create(worker->handle(), &lp, &listener);
    if (s != UCS_OK) return net::ucx_status("listener_create", s);
    ucp_listener_attr_t attr{};
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    s = ucp_listener_query(listener, &attr);
    if (s != UCS_OK) return net::ucx_status("listener_query", s);
    port = ntohs(reinterpret_cast<const sockaddr_in*>(&attr.sockaddr)->sin_port);
    return Status::ok_status();
  }

  // Tears everything down on the UCX thread, in the order UCX needs before its worker may be
  // destroyed. A rendezvous receive cannot be cancelled in UCX 1.13 (ucp_request_cancel is a
  // no-op for it), and one whose endpoint is force-closed may leave its transfer queued on the
  // transport endpoint (CMA), which trips ucs_arbiter_group_is_empty when the worker is destroyed.
  // So: no new connections; frames from now on are received and dropped (declining a rendezvous
  // with ucp_am_data_release crashes UCX 1.13); the receives in flight run to completion (the
  // sender alive) or to an error (the sender gone); only then every endpoint is force-closed and
  // its close waited for; then progress until the worker is quiet.
  // Endpoints close in flush mode here (not force): a force-close can leave a CMA transfer queued
  // on the transport endpoint even with no receive of ours in flight.
  void shutdown() {
    if (listener != nullptr) ucp_listener_destroy(listener);
    listener = nullptr;
    stopping = true;
    resume_held();  // held frames are received now, and dropped
    worker->progress_until([&] { return receives.empty(); }, std::chrono::milliseconds(5000));
    std::vector<ucp_ep_h> eps;
    for (const auto& [ep, last] : conns) eps.push_back(ep);
    for (ucp_ep_h ep : eps) close_ep(ep, /*force=*/false);
    const std::vector<PendingReceive*> cancel(receives.begin(), receives.end());
    for (PendingReceive* p : cancel) ucp_request_cancel(worker->handle(), p->request);
    worker->progress_until(
        [&] {
          reap_closing();
          return closing.empty() && receives.empty();
        },
        std::chrono::milliseconds(2000));
    for (void* req : closing) ucp_request_free(req);  // gave up waiting: UCX frees on completion
    closing.clear();
    worker->drain(std::chrono::milliseconds(20), std::chrono::milliseconds(1000));
  }
};

KvTransferServer::KvTransferServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<KvTransferServer>> KvTransferServer::start(KvTransferServerOptions options,
                                                                  KvBlockSink sink,
                                                                  KvPayloadPlacer placer) {
  options.channel = TransferChannel::kKvBlocks;
  KEEL_TRY(options.validate());
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->sinks.kv = std::move(sink);
  impl->placer = std::move(placer);
  return start_impl(std::move(impl));
}

Result<std::unique_ptr<KvTransferServer>> KvTransferServer::start_weights(
    KvTransferServerOptions options, WeightsChunkSink sink, WeightsPayloadPlacer placer) {
  options.channel = TransferChannel::kWeights;
  KEEL_TRY(options.validate());
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->sinks.weights = std::move(sink);
  impl->weights_placer = std::move(placer);
  return start_impl(std::move(impl));
}

Result<std::unique_ptr<KvTransferServer>> KvTransferServer::start_impl(std::unique_ptr<Impl> impl) {
  Impl* raw = impl.get();
  // Created before the worker (its tick reads the backlog); wakes the worker when a delivery may
  // let a held receive start.
  impl->pipeline = std::make_unique<KvReceivePipeline>(std::move(impl->sinks), [raw] {
    if (raw->holding.load(std::memory_order_relaxed)) raw->worker->wake();
  });
  const std::string thread =
      impl->options.channel == TransferChannel::kWeights ? "keel-wt-recv" : "keel-kv-recv";
  KEEL_ASSIGN_OR_RETURN(impl->worker, net::UcxWorker::start(thread, [raw] { return raw->tick(); }));
  Status status;
  impl->worker->run_sync([&] { status = raw->listen(); });
  if (!status.ok()) {
    impl->worker->run_sync([&] { raw->shutdown(); });
    return status;
  }
  return std::unique_ptr<KvTransferServer>(new KvTransferServer(std::move(impl)));
}

KvTransferServer::~KvTransferServer() {
  Impl* raw = impl_.get();
  impl_->worker->run_sync([raw] { raw->shutdown(); });
  impl_->pipeline->stop();  // delivers what was received whole, then no sink call
  impl_->worker->stop();
}

uint16_t KvTransferServer::port() const { return impl_->port; }

KvTransferServerStats KvTransferServer::stats() const {
  KvTransferServerStats s;
  {
    MutexLock lock(impl_->stats_mu);
    s = impl_->stats;
  }
  const KvDeliveryStats d = impl_->pipeline->stats();
  s.blocks_accepted = d.blocks_accepted;
  s.bytes_accepted = d.bytes_accepted;
  s.rejected_checksum = d.rejected_checksum;
  return s;
}

}  // namespace keel::cluster
