// KvEventPublisher (see kv_event_publisher.h). The thread sleeps in zmq_poll on the replay socket
// and an eventfd; publish() queues under mu_ and writes the eventfd, so it never touches a socket.
#include "cluster/kv_events/kv_event_publisher.h"

#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include <string_view>
#include <vector>

namespace keel::cluster {

Status KvEventPublisherConfig::validate() const {
  if (endpoint.empty()) return Status::invalid_argument("kv event publisher: empty endpoint");
  if (buffer_steps < 1) {
    return Status::invalid_argument("kv event publisher: buffer_steps must be ≥ 1, got " +
                                    std::to_string(buffer_steps));
  }
  if (max_queue < 1) {
    return Status::invalid_argument("kv event publisher: max_queue must be ≥ 1, got " +
                                    std::to_string(max_queue));
  }
  if (hwm < 0) {
    return Status::invalid_argument("kv event publisher: hwm must be ≥ 0, got " +
                                    std::to_string(hwm));
  }
  return Status::ok_status();
}

Result<std::unique_ptr<KvEventPublisher>> KvEventPublisher::start(KvEventPublisherConfig config) {
  KEEL_TRY(config.validate());
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return Status::io_error("kv event publisher: eventfd failed");
  std::unique_ptr<KvEventPublisher> p(new KvEventPublisher(std::move(config), fd));
  const KvEventPublisherConfig& c = p->config_;
  KEEL_ASSIGN_OR_RETURN(p->pub_, net::ZmqSocket::open(p->ctx_, ZMQ_PUB));
  KEEL_TRY(p->pub_.set_int(ZMQ_SNDHWM, c.hwm));
  KEEL_TRY(p->pub_.bind(c.endpoint));
  p->endpoint_ = p->pub_.last_endpoint();
  if (!c.replay_endpoint.empty()) {
    KEEL_ASSIGN_OR_RETURN(p->replay_, net::ZmqSocket::open(p->ctx_, ZMQ_ROUTER));
    // A replay streams up to buffer_steps messages at once: room for all of them.
    KEEL_TRY(p->replay_.set_int(
        ZMQ_SNDHWM, static_cast<int>(std::min<int64_t>(c.buffer_steps + 16, int64_t{1} << 30))));
    KEEL_TRY(p->replay_.bind(c.replay_endpoint));
    p->replay_endpoint_ = p->replay_.last_endpoint();
  }
  p->thread_ = std::thread([raw = p.get()] { raw->run(); });
  return p;
}

KvEventPublisher::KvEventPublisher(KvEventPublisherConfig config, int wake_fd)
    : config_(std::move(config)), wake_fd_(wake_fd) {}

KvEventPublisher::~KvEventPublisher() {
  shutdown();
  pub_.close();
  replay_.close();
  ::close(wake_fd_);
}

bool KvEventPublisher::publish(KvEventBatch batch) {
  {
    MutexLock lock(mu_);
    if (stopping_ || static_cast<int64_t>(queue_.size()) >= config_.max_queue) {
      dropped_.fetch_add(1);
      return false;
    }
    queue_.push_back(std::move(batch));
  }
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
  return true;
}

void KvEventPublisher::shutdown() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
}

KvEventPublisherStats KvEventPublisher::stats() const {
  return {published_.load(), dropped_.load(), replay_requests_.load()};
}

void KvEventPublisher::run() {
  while (true) {
    zmq_pollitem_t items[2] = {{nullptr, wake_fd_, ZMQ_POLLIN, 0},
                               {replay_.get(), 0, ZMQ_POLLIN, 0}};
    (void)zmq_poll(items, replay_.get() != nullptr ? 2 : 1, -1);
    uint64_t count = 0;
    (void)!::read(wake_fd_, &count, sizeof(count));  // resets the eventfd
    if (replay_.get() != nullptr) serve_replay();
    std::deque<KvEventBatch> batches;
    bool stopping = false;
    {
      MutexLock lock(mu_);
      batches.swap(queue_);
      stopping = stopping_;
    }
    for (const KvEventBatch& b : batches) send_batch(b);
    if (stopping) break;  // publish() queues nothing once stopping_ is set
  }
  // Sockets close with linger 0 (the destructor), so nothing waits on slow subscribers.
}

void KvEventPublisher::send_batch(const KvEventBatch& batch) {
  Bytes payload;
  if (!batch.data_parallel_rank.has_value() && config_.data_parallel_rank.has_value()) {
    KvEventBatch stamped = batch;
    stamped.data_parallel_rank = config_.data_parallel_rank;
    payload = encode_kv_event_batch(stamped);
  } else {
    payload = encode_kv_event_batch(batch);
  }
  const int64_t seq = next_seq_++;
  const std::string seq_bytes = net::encode_seq(seq);
  // PUB never blocks: past the high-water mark libzmq drops (a subscriber then sees a gap).
  (void)pub_.send(
      {config_.topic, seq_bytes,
       std::string_view(reinterpret_cast<const char*>(payload.data()), payload.size())});
  buffer_.emplace_back(seq, std::move(payload));
  while (static_cast<int64_t>(buffer_.size()) > config_.buffer_steps) buffer_.pop_front();
  published_.fetch_add(1);
}

void KvEventPublisher::serve_replay() {
  static const std::string kEnd = net::encode_seq(-1);
  while (std::optional<std::vector<std::string>> req = replay_.try_recv()) {
    // [identity, "", start seq]: what a REQ client (vLLM's) or a DEALER sending "" first sends.
    if (req->size() != 3) continue;
    const std::optional<int64_t> start = net::decode_seq((*req)[2]);
    if (!start.has_value()) continue;
    replay_requests_.fetch_add(1);
    const std::string& id = (*req)[0];
    for (const auto& [seq, payload] : buffer_) {
      if (seq < *start) continue;
      const std::string seq_bytes = net::encode_seq(seq);
      (void)replay_.send(
          {id, "", seq_bytes,
           std::string_view(reinterpret_cast<const char*>(payload.data()), payload.size())});
    }
    (void)replay_.send({id, "", kEnd, ""});
  }
}

}  // namespace keel::cluster
