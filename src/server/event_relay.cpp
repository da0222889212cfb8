// EventRelay (see event_relay.h). The post happens under mu_, so close() — which takes mu_ —
// cannot return while a post is in flight, and after close() the relay references nothing of
// the io_context.
#include "server/event_relay.h"

namespace keel::server {

class EventRelay::Sink final : public engine::OutputSink {
 public:
  Sink(std::shared_ptr<EventRelay> relay, size_t choice)
      : relay_(std::move(relay)), choice_(choice) {}
  void on_event(engine::TokenEvent event) override { relay_->deliver(choice_, std::move(event)); }

 private:
  std::shared_ptr<EventRelay> relay_;
  size_t choice_;
};

std::shared_ptr<engine::OutputSink> EventRelay::make_sink(size_t choice) {
  return std::make_shared<Sink>(shared_from_this(), choice);
}

void EventRelay::deliver(size_t choice, engine::TokenEvent event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  net::post(strand_, [self = shared_from_this(), choice, ev = std::move(event)]() mutable {
    if (self->signal_ == nullptr) return;  // closed meanwhile
    self->queue_.push_back(Item{choice, std::move(ev)});
    self->signal_->notify();
  });
}

std::optional<EventRelay::Item> EventRelay::pop() {
  if (queue_.empty()) return std::nullopt;
  Item item = std::move(queue_.front());
  queue_.pop_front();
  return item;
}

void EventRelay::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    // Drop the strand: the engine may keep this relay (through its sinks) after the server and
    // its io_context are gone, and a strand must not be released after its io_context.
    strand_ = net::any_io_executor();
  }
  signal_ = nullptr;
  queue_.clear();
}

}  // namespace keel::server
