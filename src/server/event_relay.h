// EventRelay: carries a request's TokenEvents from the engine thread to the request's strand.
// Each choice's OutputSink (make_sink) only posts the event to the strand — no detokenization,
// no locks held while the engine waits on anything. On the strand the events queue up in arrival
// order and wake the request's AsyncSignal.
//
// Lifetime: sinks keep the relay alive (the engine may hold them after the request ends).
// close() — on the strand, when the request is done — makes later events no-ops and guarantees
// that no post reaches the strand after close() returns (so the io_context may be destroyed).
//
// Thread safety: make_sink/close/pop/attach on the strand; sinks' on_event on any thread.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "engine/types.h"
#include "server/async_signal.h"
#include "server/net.h"

namespace keel::server {

class EventRelay : public std::enable_shared_from_this<EventRelay> {
 public:
  struct Item {
    size_t choice = 0;
    engine::TokenEvent event;
  };

  EventRelay(net::any_io_executor strand, AsyncSignal* signal)
      : strand_(std::move(strand)), signal_(signal) {}

  // A sink delivering into this relay under choice index `choice`.
  std::shared_ptr<engine::OutputSink> make_sink(size_t choice);
  // The oldest queued event, if any (strand).
  std::optional<Item> pop();
  // Stops delivery (strand). Idempotent.
  void close();

 private:
  class Sink;
  void deliver(size_t choice, engine::TokenEvent event);  // any thread

  std::mutex mu_;
  net::any_io_executor strand_;  // guarded by mu_; empty once closed
  bool closed_ = false;          // guarded by mu_
  // Strand-confined:
  AsyncSignal* signal_;  // null once closed
  std::deque<Item> queue_;
};

}  // namespace keel::server
