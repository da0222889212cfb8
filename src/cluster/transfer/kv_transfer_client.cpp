// KvTransferClient: the send queue, throttle, faults and flush on the UCX thread (see
// kv_transfer_client.h).
#include "cluster/transfer/kv_transfer_client.h"

#include <netinet/in.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "cluster/transfer/kv_batch_frame.h"
#include "cluster/transfer/kv_transfer_server.h"
#include "core/mutex.h"
#include "net/ucx_worker.h"

namespace keel::cluster {

using Clock = std::chrono::steady_clock;

static_assert(kWeightsFrameHeaderBytes <= kKvFrameHeaderBytes, "Queued::header holds either");

Status KvTransferClientOptions::validate() const {
  if (port == 0) return Status::invalid_argument("kv transfer client: port must be set");
  if (max_in_flight < 1) return Status::invalid_argument("max_in_flight must be >= 1");
  if (max_blocks_per_frame < 1 || max_blocks_per_frame > static_cast<int>(kKvBatchMaxBlocks)) {
    return Status::invalid_argument("max_blocks_per_frame must be in [1, " +
                                    std::to_string(kKvBatchMaxBlocks) + "]");
  }
  if (max_frame_bytes < 1 || max_frame_bytes > kKvBatchMaxPayloadBytes) {
    return Status::invalid_argument("max_frame_bytes must be in [1, " +
                                    std::to_string(kKvBatchMaxPayloadBytes) + "]");
  }
  if (connect_timeout.count() <= 0) return Status::invalid_argument("connect_timeout must be > 0");
  if (spin_window.count() < 0) return Status::invalid_argument("spin_window must be >= 0");
  if (faults.throttle_bytes_per_s < 0) return Status::invalid_argument("negative throttle");
  return Status::ok_status();
}

struct KvTransferClient::Impl {
  KvTransferClientOptions options;
  std::unique_ptr<net::UcxWorker> worker;

  // Shared with callers.
  Mutex mu;
  std::condition_variable cv;
  // A queued block with its frame header (checksummed by send()'s caller, off the UCX thread).
  struct Queued {
    KvFrameHeaderBytes header;  // the largest frame header; the first header_size bytes are sent
    size_t header_size = 0;
    unsigned am_id = kKvFrameAmId;  // the frame's channel
    KvFrameHeader kv;               // a KV block's fields (its batch entry); am_id kKvFrameAmId
    std::vector<std::byte> payload;
    std::span<const std::byte> borrowed;  // sent instead of `payload` when not empty
    std::shared_ptr<const void> owner;    // keeps `borrowed` valid
    [[nodiscard]] std::span<const std::byte> bytes() const {
      return borrowed.empty() ? std::span<const std::byte>(payload) : borrowed;
    }
  };
  std::deque<Queued> queue KEEL_GUARDED_BY(mu);
  size_t queued_bytes KEEL_GUARDED_BY(mu) = 0;
  Status failure KEEL_GUARDED_BY(mu);           // not ok once the connection failed
  int64_t num_queued KEEL_GUARDED_BY(mu) = 0;   // blocks accepted by send()
  int64_t num_done KEEL_GUARDED_BY(mu) = 0;     // blocks sent or dropped
  int64_t num_flushed KEEL_GUARDED_BY(mu) = 0;  // blocks confirmed delivered by a flush
  KvTransferClientStats stats KEEL_GUARDED_BY(mu);

  // UCX thread only.
  struct InFlight {
    Impl* impl = nullptr;
    std::vector<Queued> blocks;           // headers and payloads must live until the send completes
    std::vector<std::byte> batch_header;  // several blocks: their kv_batch_frame.h header
    std::vector<ucp_dt_iov_t> iov;        // several blocks: their payloads
    size_t bytes = 0;                     // payload bytes
  };
  ucp_ep_h ep = nullptr;
  int in_flight = 0;
  int64_t frames_taken = 0;  // frame index of the next block taken from the queue
  void* flush_req = nullptr;
  int64_t flush_target = 0;
  void* close_req = nullptr;
  Clock::time_point throttle_start{};
  double throttled_bytes = 0;

  void fail(Status why) {
    MutexLock lock(mu);
    if (failure.ok()) failure = std::move(why);
    stats.blocks_dropped += static_cast<int64_t>(queue.size());
    queue.clear();
    queued_bytes = 0;
    cv.notify_all();
  }

  void close_ep() {
    if (ep == nullptr) return;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void* req = ucp_ep_close_nbx(ep, &param);
    ep = nullptr;
    if (UCS_PTR_IS_PTR(req)) close_req = req;
  }

  static void on_ep_error(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
    auto* impl = static_cast<Impl*>(arg);
    impl->fail(net::ucx_status("kv transfer connection", status));
    impl->close_ep();
  }

  static void on_sent(void* request, ucs_status_t status, void* user_data) {
    auto* f = static_cast<InFlight*>(user_data);
    f->impl->sent(status, *f);
    delete f;
    ucp_request_free(request);
  }

  void sent(ucs_status_t status, const InFlight& f) {
    --in_flight;
    if (status != UCS_OK) {
      fail(net::ucx_status("am_send", status));
      return;
    }
    MutexLock lock(mu);
    num_done += static_cast<int64_t>(f.blocks.size());
    stats.blocks_sent += static_cast<int64_t>(f.blocks.size());
    ++stats.messages_sent;
    stats.bytes_sent += static_cast<int64_t>(f.bytes);
  }

  static void on_flushed(void* request, ucs_status_t status, void* user_data) {
    auto* impl = static_cast<Impl*>(user_data);
    impl->flush_req = nullptr;
    ucp_request_free(request);
    if (status != UCS_OK) {
      impl->fail(net::ucx_status("ep_flush", status));
      return;
    }
    MutexLock lock(impl->mu);
    impl->num_flushed = std::max(impl->num_flushed, impl->flush_target);
    impl->cv.notify_all();
  }

  // Takes the next message's blocks — the head of the queue and, for a KV block, the KV blocks
  // queued behind it that fit one batch (joins) — or nothing (queue empty, stalled, throttled:
  // then *wait says how long until the throttle allows it).
  std::vector<Queued> take(std::chrono::milliseconds* wait) {
    std::vector<Queued> taken;
    MutexLock lock(mu);
    if (queue.empty() || !failure.ok()) return taken;
    const KvTransferFaults& faults = options.faults;
    if (faults.stall_after_frames >= 0 && frames_taken >= faults.stall_after_frames) {
      return taken;
    }
    if (faults.throttle_bytes_per_s > 0) {
      const auto now = Clock::now();
      if (throttled_bytes == 0) throttle_start = now;
      const double allowed =
          faults.throttle_bytes_per_s * std::chrono::duration<double>(now - throttle_start).count();
      if (throttled_bytes > 0 && throttled_bytes > allowed) {
        const double seconds = (throttled_bytes - allowed) / faults.throttle_bytes_per_s;
        *wait = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1e3) + 1);
        return taken;
      }
      throttled_bytes += static_cast<double>(queue.front().bytes().size());
    }
    size_t bytes = 0;
    while (!queue.empty() && joins(taken, queue.front(), bytes)) {
      const size_t n = queue.front().bytes().size();
      bytes += n;
      queued_bytes -= n;
      taken.push_back(std::move(queue.front()));
      queue.pop_front();
    }
    return taken;
  }

  // Whether `next` joins the message being taken (`taken`: its blocks so far, of `bytes` payload
  // bytes): the first block always; more only KV blocks within the batch limits, never past a
  // fault's frame (the dropped frame goes alone, a stall stops at its frame), never throttled.
  [[nodiscard]] bool joins(const std::vector<Queued>& taken, const Queued& next,
                           size_t bytes) const {
    if (taken.empty()) return true;
    const KvTransferFaults& faults = options.faults;
    const int64_t first = frames_taken;
    const int64_t idx = first + static_cast<int64_t>(taken.size());  // next's frame index
    return taken.front().am_id == kKvFrameAmId && next.am_id == kKvFrameAmId &&
           faults.throttle_bytes_per_s <= 0 &&
           static_cast<int>(taken.size()) < options.max_blocks_per_frame &&
           bytes + next.bytes().size() <= options.max_frame_bytes && first != faults.drop_frame &&
           idx != faults.drop_frame &&
           (faults.stall_after_frames < 0 || idx < faults.stall_after_frames);
  }

  // Flips a byte of a block's payload after its checksum was taken (the corrupt fault).
  static void corrupt_payload(Queued& block) {
    if (block.bytes().empty()) return;
    if (!block.borrowed.empty()) {  // never write into a borrowed payload
      block.payload.assign(block.borrowed.begin(), block.borrowed.end());
      block.borrowed = {};
      block.owner.reset();
    }
    block.payload[0] ^= std::byte{1};
  }

  // Sends one message: one frame, or a batch frame of several KV blocks (its payload gathered
  // from the blocks' own memory).
  void send_one(std::vector<Queued> blocks) {
    const int64_t first = frames_taken;
    frames_taken += static_cast<int64_t>(blocks.size());
    if (first == options.faults.drop_frame) {  // taken alone (joins)
      MutexLock lock(mu);
      ++num_done;
      ++stats.blocks_dropped;
      return;
    }
    auto* f = new InFlight{this, std::move(blocks), {}, {}, 0};
    const int64_t corrupt = options.faults.corrupt_frame - first;
    if (corrupt >= 0 && corrupt < static_cast<int64_t>(f->blocks.size())) {
      corrupt_payload(f->blocks[static_cast<size_t>(corrupt)]);
    }
    for (const Queued& b : f->blocks) f->bytes += b.bytes().size();
    ucp_request_param_t param{};
    param.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    param.cb.send = &Impl::on_sent;
    param.user_data = f;
    param.flags = UCP_AM_SEND_FLAG_REPLY;  // the server learns which connection sent it
    void* req = nullptr;
    if (f->blocks.size() == 1) {
      const Queued& b = f->blocks.front();
      req = ucp_am_send_nbx(ep, b.am_id, b.header.data(), b.header_size, b.bytes().data(),
                            b.bytes().size(), &param);
    } else {
      KvBatchHeader batch;
      batch.kv_identity = options.kv_identity;
      for (const Queued& b : f->blocks) {
        batch.blocks.push_back(b.kv);
        f->iov.push_back({const_cast<std::byte*>(b.bytes().data()), b.bytes().size()});
      }
      f->batch_header = encode_batch_header(batch);
      param.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
      param.datatype = ucp_dt_make_iov();
      req = ucp_am_send_nbx(ep, kKvFrameAmId, f->batch_header.data(), f->batch_header.size(),
                            f->iov.data(), f->iov.size(), &param);
    }
    ++in_flight;
    if (UCS_PTR_IS_PTR(req)) return;
    sent(UCS_PTR_STATUS(req), *f);
    delete f;
  }

  // The UCX thread's tick: sends what the window, throttle and faults allow; flushes when idle.
  std::chrono::milliseconds tick() {
    std::chrono::milliseconds wait{100};
    while (ep != nullptr && in_flight < options.max_in_flight) {
      std::vector<Queued> blocks = take(&wait);
      if (blocks.empty()) break;
      send_one(std::move(blocks));
    }
    maybe_flush();
    if (in_flight > 0 || flush_req != nullptr || close_req != nullptr)
      return std::min(wait, std::chrono::milliseconds(1));
    return wait;
  }

  void maybe_flush() {
    if (ep == nullptr || in_flight > 0 || flush_req != nullptr) return;
    {
      MutexLock lock(mu);
      if (!queue.empty() || num_flushed >= num_done) return;
      flush_target = num_done;
    }
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = &Impl::on_flushed;
    param.user_data = this;
    void* req = ucp_ep_flush_nbx(ep, &param);
    if (UCS_PTR_IS_PTR(req)) {
      flush_req = req;
    } else if (UCS_PTR_IS_ERR(req)) {
      fail(net::ucx_status("ep_flush", UCS_PTR_STATUS(req)));
    } else {
      MutexLock lock(mu);
      num_flushed = std::max(num_flushed, flush_target);
      cv.notify_all();
    }
  }

  Status open() {
    KEEL_ASSIGN_OR_RETURN(sockaddr_storage addr, net::resolve_ipv4(options.host, options.port));
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
    params.sockaddr.addrlen = sizeof(sockaddr_in);
    params.err_mode = kKvTransferErrMode;
    params.err_handler.cb = &Impl::on_ep_error;
    params.err_handler.arg = this;
    const ucs_status_t s = ucp_ep_create(worker->handle(), &params, &ep);
    if (s != UCS_OK) {
      ep = nullptr;
      return net::ucx_status("ep_create", s);
    }
    return wait_connected();
  }

  // A flush completes once the connection's wire-up has: until then UCX 1.13 may send a
  // rendezvous with the pre-wire-up lane configuration and abort (rndv.c "packed_rkey_size").
  Status wait_connected() {
    ucp_request_param_t param{};
    void* req = ucp_ep_flush_nbx(ep, &param);
    if (UCS_PTR_IS_ERR(req)) return net::ucx_status("connect", UCS_PTR_STATUS(req));
    if (req == nullptr) return Status::ok_status();
    ucs_status_t status = UCS_INPROGRESS;
    worker->progress_until(
        [&] { return (status = ucp_request_check_status(req)) != UCS_INPROGRESS; },
        options.connect_timeout);
    ucp_request_free(req);
    if (status == UCS_INPROGRESS) return Status::unavailable("kv transfer: connect timed out");
    if (status != UCS_OK) return net::ucx_status("connect", status);
    return Status::ok_status();
  }

  // On the UCX thread: abandons the queue, force-closes the endpoint (UCX completes the sends and
  // the flush in flight with an error), waits (bounded) until the close and every request
  // completed, then until the worker is quiet (a closed endpoint's transport endpoints are
  // flushed and destroyed in the background and must be gone before the worker is destroyed).
  void shutdown() {
    fail(Status::cancelled("kv transfer client closed"));
    close_ep();
    worker->progress_until(
        [&] {
          if (close_req != nullptr && ucp_request_check_status(close_req) != UCS_INPROGRESS) {
            ucp_request_free(close_req);
            close_req = nullptr;
          }
          return close_req == nullptr && in_flight == 0 && flush_req == nullptr;
        },
        std::chrono::milliseconds(2000));
    if (close_req != nullptr) ucp_request_free(close_req);
    close_req = nullptr;
    worker->drain(std::chrono::milliseconds(20), std::chrono::milliseconds(1000));
  }
};

KvTransferClient::KvTransferClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<KvTransferClient>> KvTransferClient::connect(
    KvTransferClientOptions options) {
  KEEL_TRY(options.validate());
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  Impl* raw = impl.get();
  KEEL_ASSIGN_OR_RETURN(impl->worker, net::UcxWorker::start(
                                          "keel-kv-send", [raw] { return raw->tick(); },
                                          /*wakeup=*/false, impl->options.spin_window));
  Status status;
  impl->worker->run_sync([&] { status = raw->open(); });
  if (!status.ok()) {
    impl->worker->run_sync([&] { raw->shutdown(); });
    return status;
  }
  return std::unique_ptr<KvTransferClient>(new KvTransferClient(std::move(impl)));
}

KvTransferClient::~KvTransferClient() {
  Impl* raw = impl_.get();
  impl_->worker->run_sync([raw] { raw->shutdown(); });
  impl_->worker->stop();
}

Status KvTransferClient::send(KvBlockToSend block) {
  if (block.num_tokens == 0 || block.num_tokens > kKvFrameMaxTokens ||
      block.bytes().size() > kKvFrameMaxPayloadBytes) {
    return Status::invalid_argument("kv transfer: block out of the frame limits");
  }
  const std::span<const std::byte> bytes = block.bytes();
  KvFrameHeader header;
  header.kv_identity = impl_->options.kv_identity;
  header.block_hash = block.block_hash;
  header.parent_hash = block.parent_hash;
  header.num_tokens = block.num_tokens;
  header.payload_bytes = bytes.size();
  header.payload_checksum =
      block.payload_checksum.has_value() ? *block.payload_checksum : frame_payload_checksum(bytes);
  return enqueue(encode_frame_header(header), kKvFrameAmId, header, std::move(block.payload),
                 block.borrowed, std::move(block.owner));
}

Status KvTransferClient::send_weights(WeightsChunkToSend chunk) {
  const std::span<const std::byte> bytes = chunk.bytes();
  if (bytes.size() > kWeightsFrameMaxPayloadBytes || chunk.offset > chunk.entry_bytes ||
      bytes.size() > chunk.entry_bytes - chunk.offset) {
    return Status::invalid_argument("kv transfer: weights chunk out of the frame limits");
  }
  WeightsFrameHeader header;
  header.stream_identity = chunk.stream_identity;
  header.offset = chunk.offset;
  header.entry_bytes = chunk.entry_bytes;
  header.entry_hash = chunk.entry_hash;
  header.stream_id = chunk.stream_id;
  header.payload_bytes = bytes.size();
  header.payload_checksum =
      chunk.payload_checksum.has_value() ? *chunk.payload_checksum : frame_payload_checksum(bytes);
  return enqueue(encode_weights_header(header), kWeightsFrameAmId, KvFrameHeader{},
                 std::move(chunk.payload), chunk.borrowed, std::move(chunk.owner));
}

Status KvTransferClient::enqueue(std::span<const std::byte> header, unsigned am_id,
                                 const KvFrameHeader& kv, std::vector<std::byte> payload,
                                 std::span<const std::byte> borrowed,
                                 std::shared_ptr<const void> owner) {
  Impl::Queued queued;
  std::copy(header.begin(), header.end(), queued.header.begin());
  queued.header_size = header.size();
  queued.am_id = am_id;
  queued.kv = kv;
  queued.payload = std::move(payload);
  queued.borrowed = borrowed;
  queued.owner = std::move(owner);
  const size_t n = queued.bytes().size();
  {
    MutexLock lock(impl_->mu);
    if (!impl_->failure.ok()) return Status::unavailable(impl_->failure.message());
    if (impl_->queued_bytes + n > impl_->options.max_queued_bytes) {
      return Status::resource_exhausted("kv transfer: send queue full");
    }
    impl_->queued_bytes += n;
    impl_->queue.push_back(std::move(queued));
    ++impl_->num_queued;
    ++impl_->stats.blocks_queued;
  }
  impl_->worker->wake();
  return Status::ok_status();
}

Status KvTransferClient::flush(Clock::time_point deadline) {
  UniqueLock lock(impl_->mu);
  const int64_t target = impl_->num_queued;
  lock.unlock();
  impl_->worker->wake();
  lock.lock();
  const bool done = impl_->cv.wait_until(lock.native(), deadline, [&] {
    impl_->mu.assert_held();  // a wait's predicate runs under its lock
    return impl_->num_flushed >= target || !impl_->failure.ok();
  });
  if (!impl_->failure.ok()) return Status::unavailable(impl_->failure.message());
  if (!done) return Status::unavailable(kKvFlushTimedOut);
  return Status::ok_status();
}

KvTransferClientStats KvTransferClient::stats() const {
  MutexLock lock(impl_->mu);
  return impl_->stats;
}

}  // namespace keel::cluster

namespace keel::cluster {

std::string KvTransferClient::describe_transport() const {
  std::string text;
  Impl* raw = impl_.get();
  impl_->worker->run_sync([&] {
    if (raw->ep == nullptr) return;
    char* buf = nullptr;
    size_t len = 0;
    FILE* f = open_memstream(&buf, &len);
    if (f == nullptr) return;
    ucp_ep_print_info(raw->ep, f);
    std::fclose(f);
    text.assign(buf, len);
    std::free(buf);
  });
  return text;
}

}  // namespace keel::cluster
