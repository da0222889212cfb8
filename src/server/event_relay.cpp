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
  MutexLock lock(mu_);
  if (closed_) return;
  net::post(strand_, [self = shared_from_this(), choice, ev = std::move(event)]() mutable {
    if (self->signal_ == nullptr) return;  // closed meanwhile
    self->queue_.push_back(Item{choice, std::move(ev)});
    self->signal_->notify();
  });
}

engine::EngineClient::SubmitDone EventRelay::make_done(size_t choice,
                                                       engine::EngineClient* engine) {
  {
    MutexLock lock(mu_);
    engine_ = engine;
  }
  return [self = shared_from_this(), choice](Result<engine::RequestKey> key) {
    self->deliver_placement(Placement{choice, std::move(key)});
  };
}

void EventRelay::deliver_placement(Placement placement) {
  engine::EngineClient* abort_in = nullptr;
  {
    MutexLock lock(mu_);
    if (closed_) {
      abort_in = engine_;
    } else {
      placements_.push_back(std::move(placement));
      net::post(strand_, [self = shared_from_this()] {
        if (self->signal_ != nullptr) self->signal_->notify();
      });
      return;
    }
  }
  // Placed after the request ended (its client left during a hold, say): nobody reads it.
  if (abort_in != nullptr && placement.key.ok()) abort_in->abort(*placement.key);
}

std::optional<EventRelay::Placement> EventRelay::pop_placement() {
  MutexLock lock(mu_);
  if (placements_.empty()) return std::nullopt;
  Placement p = std::move(placements_.front());
  placements_.pop_front();
  return p;
}

std::optional<EventRelay::Item> EventRelay::pop() {
  if (queue_.empty()) return std::nullopt;
  Item item = std::move(queue_.front());
  queue_.pop_front();
  return item;
}

void EventRelay::close() {
  std::deque<Placement> unread;
  engine::EngineClient* engine = nullptr;
  {
    MutexLock lock(mu_);
    closed_ = true;
    // Drop the strand: the engine may keep this relay (through its sinks) after the server and
    // its io_context are gone, and a strand must not be released after its io_context.
    strand_ = net::any_io_executor();
    unread.swap(placements_);
    engine = engine_;
  }
  signal_ = nullptr;
  queue_.clear();
  for (const Placement& p : unread) {
    if (p.key.ok() && engine != nullptr) engine->abort(*p.key);
  }
}

}  // namespace keel::server
