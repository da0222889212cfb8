// Caller: the cluster manager's remote calls by address — a node agent's or a JE's control
// endpoint — behind one narrow interface, so the manager's logic (placement, eviction, fencing,
// take-over) runs in unit tests over fake peers with no process and no socket. LinkCaller is the
// real one: one cluster::Link per address, connected on first use and reused while it stays open.
//
// Thread safety: call() from any thread (announce calls every agent at once); close() with no
// call in flight.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "cluster/protocol/messages.h"
#include "core/mutex.h"
#include "core/result.h"
#include "net/link.h"

namespace keel::control {

class Caller {
 public:
  virtual ~Caller() = default;
  // Sends call `m` to `address` ("host:port") and returns the reply's body; connecting and the
  // reply each take at most `timeout` (Unavailable / DeadlineExceeded otherwise).
  virtual Result<cluster::Json> call(const std::string& address, net::Message m,
                                     std::chrono::milliseconds timeout) = 0;
  // Drops every connection (the next call connects again).
  virtual void close() = 0;
};

class LinkCaller final : public Caller {
 public:
  ~LinkCaller() override { close(); }
  Result<cluster::Json> call(const std::string& address, net::Message m,
                             std::chrono::milliseconds timeout) override;
  void close() override;

 private:
  // The open link to `address`, connected now when there is none (bounded by `timeout`).
  Result<std::shared_ptr<net::Link>> link_to(const std::string& address,
                                             std::chrono::milliseconds timeout);

  Mutex mu_;
  std::map<std::string, std::shared_ptr<net::Link>> links_ KEEL_GUARDED_BY(mu_);
};

}  // namespace keel::control
