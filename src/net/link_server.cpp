// LinkServer (see link_server.h): a listener and the links it accepted.
#include "net/link_server.h"

#include <algorithm>
#include <utility>

namespace keel::net {

Result<std::unique_ptr<LinkServer>> LinkServer::start(const std::string& host, uint16_t port,
                                                      Link::MessageHandler on_message,
                                                      Link::CloseHandler on_close) {
  std::unique_ptr<LinkServer> s(new LinkServer());
  LinkServer* self = s.get();
  KEEL_ASSIGN_OR_RETURN(
      s->listener_,
      Listener::start(host, port, std::move(on_message), std::move(on_close),
                      [self](std::shared_ptr<Link> link) { self->adopt(std::move(link)); }));
  return s;
}

LinkServer::~LinkServer() { stop(); }

void LinkServer::adopt(std::shared_ptr<Link> link) {
  std::vector<std::shared_ptr<Link>> closed;  // dropped (their threads joined) outside mu_
  {
    MutexLock lock(mu_);
    if (stopped_) {
      link->close();
      closed.push_back(std::move(link));
    } else {
      auto open_end = std::stable_partition(links_.begin(), links_.end(),
                                            [](const auto& l) { return !l->closed(); });
      std::move(open_end, links_.end(), std::back_inserter(closed));
      links_.erase(open_end, links_.end());
      links_.push_back(std::move(link));
    }
  }
}

std::vector<std::shared_ptr<Link>> LinkServer::links() const {
  std::vector<std::shared_ptr<Link>> open;
  MutexLock lock(mu_);
  for (const auto& l : links_) {
    if (!l->closed()) open.push_back(l);
  }
  return open;
}

void LinkServer::stop() {
  std::vector<std::shared_ptr<Link>> links;
  {
    MutexLock lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    links.swap(links_);
  }
  if (listener_ != nullptr) listener_->stop();  // null when start() failed to listen
  for (auto& link : links) link->close();
  links.clear();  // joins the links' threads (none of them is this one)
}

}  // namespace keel::net
