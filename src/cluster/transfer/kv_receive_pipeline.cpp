// KvReceivePipeline: in-order delivery, per-block checksums and the buffer pool (see
// kv_receive_pipeline.h).
#include "cluster/transfer/kv_receive_pipeline.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "core/check.h"

namespace keel::cluster {
namespace {

// The pool keeps at most this many finished buffers, of at most this many bytes together: a
// fresh multi-megabyte buffer per frame costs page faults (and the kernel's zeroing) again.
constexpr size_t kMaxSpare = 16;
constexpr size_t kMaxSpareBytes = size_t{96} << 20;

}  // namespace

uint64_t received_payload_bytes(const ReceivedHeader& header) {
  if (const auto* kv = std::get_if<KvFrameHeader>(&header)) return kv->payload_bytes;
  if (const auto* batch = std::get_if<KvBatchHeader>(&header)) return batch->payload_bytes();
  return std::get<WeightsFrameHeader>(header).payload_bytes;
}

KvReceivePipeline::KvReceivePipeline(Sinks sinks, std::function<void()> on_delivered)
    : sinks_(std::move(sinks)), on_delivered_(std::move(on_delivered)) {
  thread_ = std::thread([this] { run(); });
}

KvReceivePipeline::~KvReceivePipeline() { stop(); }

uint64_t KvReceivePipeline::reserve(size_t length) {
  MutexLock lock(mu_);
  if (stopping_) return first_ticket_ + places_.size();  // never delivered: complete() drops it
  places_.push_back(Place{length, false, std::nullopt});
  backlog_ += length;
  return first_ticket_ + places_.size() - 1;
}

void KvReceivePipeline::complete(uint64_t ticket, ReceivedFrame frame) {
  MutexLock lock(mu_);
  if (ticket < first_ticket_ || ticket - first_ticket_ >= places_.size()) return;  // stopped
  Place& place = places_[ticket - first_ticket_];
  KEEL_CHECK(!place.settled);
  place.settled = true;
  place.frame = std::move(frame);
  cv_.notify_one();
}

void KvReceivePipeline::abandon(uint64_t ticket) {
  MutexLock lock(mu_);
  if (ticket < first_ticket_ || ticket - first_ticket_ >= places_.size()) return;
  Place& place = places_[ticket - first_ticket_];
  KEEL_CHECK(!place.settled);
  place.settled = true;
  cv_.notify_one();
}

PayloadBuffer KvReceivePipeline::take_buffer(size_t length) {
  {
    MutexLock lock(mu_);
    auto best = spare_.end();
    for (auto it = spare_.begin(); it != spare_.end(); ++it) {
      if (it->capacity >= length && (best == spare_.end() || it->capacity < best->capacity)) {
        best = it;
      }
    }
    if (best != spare_.end()) {
      PayloadBuffer buffer = std::move(*best);
      spare_.erase(best);
      spare_bytes_ -= buffer.capacity;
      return buffer;
    }
  }
  // Not zeroed: a receive fills it. A power of two (at least 4 KB), so the varying sizes of
  // batches fall into a few classes and a pooled buffer fits the next frame.
  const size_t capacity = std::bit_ceil(std::max<size_t>(length, 4096));
  return PayloadBuffer{std::unique_ptr<std::byte[]>(new std::byte[capacity]), capacity};
}

void KvReceivePipeline::recycle(PayloadBuffer buffer) {
  if (buffer.bytes == nullptr) return;
  MutexLock lock(mu_);
  if (spare_.size() >= kMaxSpare || spare_bytes_ + buffer.capacity > kMaxSpareBytes) return;
  spare_bytes_ += buffer.capacity;
  spare_.push_back(std::move(buffer));
}

size_t KvReceivePipeline::backlog_bytes() const {
  MutexLock lock(mu_);
  return backlog_;
}

KvDeliveryStats KvReceivePipeline::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

// One frame: each block (or the chunk) checked, then handed to its sink; counted.
void KvReceivePipeline::deliver(ReceivedFrame& frame) {
  KvDeliveryStats counts;
  const auto one = [&](const auto& header, std::span<const std::byte> bytes, Status checked,
                       const auto& sink) {
    if (!checked.ok()) {
      ++counts.rejected_checksum;
      return;
    }
    ++counts.blocks_accepted;
    counts.bytes_accepted += static_cast<int64_t>(bytes.size());
    if (sink) sink(header, bytes);
  };
  if (const auto* kv = std::get_if<KvFrameHeader>(&frame.header)) {
    one(*kv, frame.payload, check_frame_payload(*kv, frame.payload), sinks_.kv);
  } else if (const auto* batch = std::get_if<KvBatchHeader>(&frame.header)) {
    size_t offset = 0;
    for (const KvFrameHeader& block : batch->blocks) {
      const std::span<const std::byte> bytes = frame.payload.subspan(offset, block.payload_bytes);
      offset += block.payload_bytes;
      one(block, bytes, check_frame_payload(block, bytes), sinks_.kv);
    }
  } else {
    const auto& w = std::get<WeightsFrameHeader>(frame.header);
    one(w, frame.payload, check_weights_payload(w, frame.payload), sinks_.weights);
  }
  MutexLock lock(mu_);
  stats_.blocks_accepted += counts.blocks_accepted;
  stats_.bytes_accepted += counts.bytes_accepted;
  stats_.rejected_checksum += counts.rejected_checksum;
}

void KvReceivePipeline::run() {
  UniqueLock lock(mu_);
  while (true) {
    cv_.wait(lock.native(), [this] {
      mu_.assert_held();  // a wait's predicate runs under its lock
      return stopping_ || (!places_.empty() && places_.front().settled);
    });
    if (places_.empty() || !places_.front().settled) return;  // stopping, nothing ready
    Place place = std::move(places_.front());
    places_.pop_front();
    ++first_ticket_;
    lock.unlock();
    if (place.frame.has_value()) {
      deliver(*place.frame);
      recycle(std::move(place.frame->buffer));
      place.frame.reset();  // drops `keep` before the backlog says the bytes are gone
    }
    lock.lock();
    backlog_ -= place.length;
    if (on_delivered_) {
      lock.unlock();
      on_delivered_();
      lock.lock();
    }
  }
}

void KvReceivePipeline::stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  MutexLock lock(mu_);
  first_ticket_ += places_.size();
  places_.clear();  // pending or behind a pending one: dropped
  backlog_ = 0;
}

}  // namespace keel::cluster
