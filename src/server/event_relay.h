// EventRelay: carries a request's TokenEvents from the engine thread to the request's strand.
// Each choice's OutputSink (make_sink) only posts the event to the strand — no detokenization,
// no locks held while the engine waits on anything. On the strand the events queue up in arrival
// order and wake the request's AsyncSignal. It carries the outcome of each choice's
// EngineClient::submit_async the same way (make_done, pop_placement), so a submission the engine
// holds (the gateway's activator) never blocks the strand's thread.
//
// Lifetime: sinks and SubmitDones keep the relay alive (the engine may hold them after the
// request ends). close() — on the strand, when the request is done — makes later events no-ops,
// aborts every engine request placed but not yet popped (and any placed later, as its SubmitDone
// runs), and guarantees that no post reaches the strand after close() returns (so the io_context
// may be destroyed).
//
// Thread safety: make_sink/make_done/close/pop/pop_placement on the strand; sinks' on_event and
// the SubmitDones on any thread.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <utility>

#include "core/mutex.h"
#include "core/result.h"
#include "engine/engine_client.h"
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

  struct Placement {
    size_t choice = 0;
    Result<engine::RequestKey> key;  // submit()'s result
  };

  // A sink delivering into this relay under choice index `choice`.
  std::shared_ptr<engine::OutputSink> make_sink(size_t choice);
  // The SubmitDone of choice `choice`'s submit_async; `engine` (which must outlive the relay's
  // use) aborts a request placed after close().
  engine::EngineClient::SubmitDone make_done(size_t choice, engine::EngineClient* engine);
  // The oldest queued event, if any (strand).
  std::optional<Item> pop();
  // The oldest submission outcome not yet popped, if any (strand; an inline one is here as soon
  // as submit_async returns).
  std::optional<Placement> pop_placement();
  // Stops delivery (strand). Idempotent.
  void close();

 private:
  class Sink;
  void deliver(size_t choice, engine::TokenEvent event);  // any thread
  void deliver_placement(Placement placement);            // any thread

  Mutex mu_;
  net::any_io_executor strand_ KEEL_GUARDED_BY(mu_);  // empty once closed
  bool closed_ KEEL_GUARDED_BY(mu_) = false;
  std::deque<Placement> placements_ KEEL_GUARDED_BY(mu_);
  engine::EngineClient* engine_ KEEL_GUARDED_BY(mu_) = nullptr;  // set by make_done
  // Strand-confined:
  AsyncSignal* signal_;  // null once closed
  std::deque<Item> queue_;
};

}  // namespace keel::server
