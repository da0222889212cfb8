// LinkCaller: a cached link per address (see caller.h).
#include "control/manager/caller.h"

#include <algorithm>

namespace keel::control {
namespace {

// The longest a connect may take, whatever the call's own bound.
constexpr std::chrono::milliseconds kMaxConnect{5000};

}  // namespace

Result<std::shared_ptr<net::Link>> LinkCaller::link_to(const std::string& address,
                                                       std::chrono::milliseconds timeout) {
  {
    MutexLock lock(mu_);
    const auto it = links_.find(address);
    if (it != links_.end() && !it->second->closed()) return it->second;
  }
  // Connected outside the lock: one unreachable peer must not hold up calls to the others.
  KEEL_ASSIGN_OR_RETURN(
      std::shared_ptr<net::Link> link,
      net::Link::connect(
          address, std::min(timeout, kMaxConnect), [](net::Link&, net::Message) {}, nullptr));
  MutexLock lock(mu_);
  std::shared_ptr<net::Link>& slot = links_[address];
  if (slot && !slot->closed()) {  // another caller connected meanwhile: keep one link
    link->close();
    return slot;
  }
  slot = link;
  return link;
}

Result<cluster::Json> LinkCaller::call(const std::string& address, net::Message m,
                                       std::chrono::milliseconds timeout) {
  KEEL_ASSIGN_OR_RETURN(std::shared_ptr<net::Link> link, link_to(address, timeout));
  return link->call(std::move(m), timeout);
}

void LinkCaller::close() {
  std::map<std::string, std::shared_ptr<net::Link>> links;
  {
    MutexLock lock(mu_);
    links.swap(links_);
  }
  for (auto& [address, link] : links) link->close();
}

}  // namespace keel::control
