// FakeCaller: control::Caller over in-process handlers, for the control plane's unit tests — the
// peers a manager calls (node agents, JEs) as functions of the message, every call recorded.
//
// Thread safety: call() from any thread (handlers run one at a time, under its lock).
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cluster/protocol/messages.h"
#include "control/manager/caller.h"

namespace keel::control {

// The calls made, in order, and a handler per address; an address with none refuses.
class FakeCaller final : public Caller {
 public:
  using Handler = std::function<Result<cluster::Json>(const net::Message&)>;
  void serve(const std::string& address, Handler h) {
    std::lock_guard lock(mu_);
    handlers_[address] = std::move(h);
  }
  void unplug(const std::string& address) {
    std::lock_guard lock(mu_);
    handlers_.erase(address);
  }
  Result<cluster::Json> call(const std::string& address, net::Message m,
                             std::chrono::milliseconds) override {
    std::lock_guard lock(mu_);
    calls.push_back(address + " " + m.type);
    const auto it = handlers_.find(address);
    if (it == handlers_.end()) return Status::unavailable("connect to " + address + ": refused");
    return it->second(m);
  }
  void close() override {}
  // The calls of type `type` made to `address`.
  int count(const std::string& address, const std::string& type) {
    std::lock_guard lock(mu_);
    return static_cast<int>(std::count(calls.begin(), calls.end(), address + " " + type));
  }
  std::vector<std::string> calls;

 private:
  std::mutex mu_;
  std::map<std::string, Handler> handlers_;
};

}  // namespace keel::control
