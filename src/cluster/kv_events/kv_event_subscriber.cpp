// KvEventSubscriber (see kv_event_subscriber.h).
#include "cluster/kv_events/kv_event_subscriber.h"

#include <zmq.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <string_view>
#include <utility>

#include "cluster/kv_events/kv_event_codec.h"

namespace keel::cluster {
namespace {

std::span<const uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace

Status KvEventSubscriberConfig::validate() const {
  if (sources.empty()) return Status::invalid_argument("kv event subscriber: no sources");
  for (const KvEventSource& s : sources) {
    if (s.endpoint.empty()) {
      return Status::invalid_argument("kv event subscriber: source '" + s.te_id +
                                      "' has no endpoint");
    }
  }
  if (start_seq < -1) {
    return Status::invalid_argument("kv event subscriber: start_seq must be ≥ −1, got " +
                                    std::to_string(start_seq));
  }
  if (replay_timeout_ms < 1 || poll_interval_ms < 1 || catch_up_ms < 0) {
    return Status::invalid_argument(
        "kv event subscriber: replay_timeout_ms and poll_interval_ms must be ≥ 1, catch_up_ms ≥ 0");
  }
  return Status::ok_status();
}

Result<std::unique_ptr<KvEventSubscriber>> KvEventSubscriber::start(KvEventSubscriberConfig config,
                                                                    KvEventCallback callback) {
  KEEL_TRY(config.validate());
  if (!callback) return Status::invalid_argument("kv event subscriber: no callback");
  std::unique_ptr<KvEventSubscriber> s(
      new KvEventSubscriber(std::move(config), std::move(callback)));
  for (const KvEventSource& info : s->config_.sources) {
    Source src{info, {}, s->config_.start_seq};
    src.heard = std::chrono::steady_clock::now();
    // The first catch-up comes soon: what the source published while the SUB socket was still
    // connecting is in its replay buffer, and a request may already depend on it.
    src.quiet_ms = std::min<int64_t>(s->config_.catch_up_ms, 50);
    KEEL_ASSIGN_OR_RETURN(src.sub, net::ZmqSocket::open(s->ctx_, ZMQ_SUB));
    KEEL_TRY(src.sub.set_int(ZMQ_RCVHWM, 0));
    KEEL_TRY(src.sub.set_bytes(ZMQ_SUBSCRIBE, s->config_.topic));
    KEEL_TRY(src.sub.connect(info.endpoint));
    s->sources_.push_back(std::move(src));
  }
  s->thread_ = std::thread([raw = s.get()] { raw->run(); });
  return s;
}

KvEventSubscriber::KvEventSubscriber(KvEventSubscriberConfig config, KvEventCallback callback)
    : config_(std::move(config)), callback_(std::move(callback)) {}

KvEventSubscriber::~KvEventSubscriber() {
  stop();
  sources_.clear();  // sockets close before the context terminates
}

void KvEventSubscriber::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

KvEventSubscriberStats KvEventSubscriber::stats() const {
  return {delivered_.load(),     replayed_.load(), lost_.load(),
          decode_errors_.load(), restarts_.load(), duplicates_.load()};
}

void KvEventSubscriber::run() {
  std::vector<zmq_pollitem_t> items(sources_.size());
  while (!stop_.load()) {
    for (size_t i = 0; i < sources_.size(); ++i) {
      items[i] = zmq_pollitem_t{sources_[i].sub.get(), 0, ZMQ_POLLIN, 0};
    }
    const int ready =
        zmq_poll(items.data(), static_cast<int>(items.size()), config_.poll_interval_ms);
    for (size_t i = 0; i < sources_.size() && !stop_.load(); ++i) {
      if (ready <= 0 || (items[i].revents & ZMQ_POLLIN) == 0) {
        catch_up(sources_[i]);  // quiet: anything published before the subscription took?
        continue;
      }
      // A bounded batch per wake-up, so one busy source cannot starve the others or stop().
      for (int n = 0; n < 256 && !stop_.load(); ++n) {
        std::optional<std::vector<std::string>> frames = sources_[i].sub.try_recv();
        if (!frames.has_value()) break;
        on_message(sources_[i], *frames);
      }
    }
  }
}

void KvEventSubscriber::catch_up(Source& src) {
  if (config_.catch_up_ms == 0 || src.info.replay_endpoint.empty() || src.next_seq < 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - src.heard < std::chrono::milliseconds(src.quiet_ms)) return;
  const int64_t from = src.next_seq;
  replay(src, std::numeric_limits<int64_t>::max(), std::min(config_.replay_timeout_ms, 100));
  src.heard = std::chrono::steady_clock::now();
  if (src.next_seq > from) {
    src.caught_up_from = from;
    src.caught_up_at = src.heard;
    src.quiet_ms = config_.catch_up_ms;
  } else {
    src.quiet_ms = std::min<int64_t>(src.quiet_ms * 2, int64_t{64} * config_.catch_up_ms);
  }
}

void KvEventSubscriber::on_message(Source& src, const std::vector<std::string>& frames) {
  // [topic, seq, payload]
  const std::optional<int64_t> seq = frames.size() == 3 ? net::decode_seq(frames[1]) : std::nullopt;
  if (!seq.has_value() || *seq < 0) {
    decode_errors_.fetch_add(1);
    return;
  }
  src.heard = std::chrono::steady_clock::now();
  if (*seq < src.next_seq && src.caught_up_from >= 0 && *seq >= src.caught_up_from &&
      src.heard - src.caught_up_at < std::chrono::seconds(1)) {
    duplicates_.fetch_add(1);  // in flight while a catch-up delivered it
    return;
  }
  if (src.next_seq >= 0 && *seq < src.next_seq) {
    // The live stream only moves forward: the publisher restarted and numbers from 0 again.
    restarts_.fetch_add(1);
    KvEventBatch cleared;
    cleared.ts =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    cleared.events.emplace_back(AllBlocksCleared{});
    callback_(src.info.te_id, -1, cleared);
    src.next_seq = 0;
  }
  if (src.next_seq < 0) src.next_seq = *seq;
  if (*seq > src.next_seq) replay(src, *seq, config_.replay_timeout_ms);
  if (*seq > src.next_seq) {
    lost_.fetch_add(*seq - src.next_seq);
    src.next_seq = *seq;
  }
  deliver(src, *seq, frames[2], /*replayed=*/false);
}

void KvEventSubscriber::replay(Source& src, int64_t until, int32_t timeout_ms) {
  if (src.info.replay_endpoint.empty()) return;
  // A fresh DEALER per replay: an abandoned request (timeout) can never answer a later one.
  Result<net::ZmqSocket> opened = net::ZmqSocket::open(ctx_, ZMQ_DEALER);
  if (!opened.ok()) return;
  net::ZmqSocket dealer = std::move(opened).value();
  if (!dealer.set_int(ZMQ_RCVHWM, 0).ok() || !dealer.connect(src.info.replay_endpoint).ok()) {
    return;
  }
  const std::string start = net::encode_seq(src.next_seq);
  if (!dealer.send({"", start})) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!stop_.load()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return;
    if (!dealer.wait_readable(
            static_cast<int>(std::min<int64_t>(left, config_.poll_interval_ms)))) {
      continue;
    }
    while (std::optional<std::vector<std::string>> frames = dealer.try_recv()) {
      // ["", seq, payload]
      const std::optional<int64_t> seq =
          frames->size() == 3 ? net::decode_seq((*frames)[1]) : std::nullopt;
      if (!seq.has_value()) {
        decode_errors_.fetch_add(1);
        continue;
      }
      if (*seq == -1) return;  // end marker
      if (*seq < src.next_seq || *seq >= until) continue;
      if (*seq > src.next_seq) {  // the buffer no longer holds the ones before
        lost_.fetch_add(*seq - src.next_seq);
        src.next_seq = *seq;
      }
      deliver(src, *seq, (*frames)[2], /*replayed=*/true);
    }
  }
}

void KvEventSubscriber::deliver(Source& src, int64_t seq, std::string_view payload, bool replayed) {
  src.next_seq = seq + 1;
  Result<KvEventBatch> batch = decode_kv_event_batch(as_bytes(payload));
  if (!batch.ok()) {
    decode_errors_.fetch_add(1);
    return;
  }
  delivered_.fetch_add(1);
  if (replayed) replayed_.fetch_add(1);
  callback_(src.info.te_id, seq, *batch);
}

}  // namespace keel::cluster
