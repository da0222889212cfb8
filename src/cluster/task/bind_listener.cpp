// BindListener (see bind_listener.h).
#include "cluster/task/bind_listener.h"

namespace keel::cluster {

Result<std::unique_ptr<BindListener>> BindListener::start(const std::string& host) {
  std::unique_ptr<BindListener> b(new BindListener());
  BindListener* self = b.get();
  KEEL_ASSIGN_OR_RETURN(
      b->listener_,
      Listener::start(
          host, 0, [self](Link& link, Message m) { self->on_message(link, std::move(m)); },
          [](Link&) {},
          [self](std::shared_ptr<Link> link) {
            std::lock_guard<std::mutex> lock(self->mu_);
            self->links_.push_back(std::move(link));
          }));
  return b;
}

BindListener::~BindListener() {
  listener_->stop();
  std::vector<std::shared_ptr<Link>> links;
  {
    std::lock_guard<std::mutex> lock(mu_);
    links.swap(links_);
  }
  for (auto& l : links) l->close();
}

void BindListener::on_message(Link& link, Message m) {
  if (m.type != kBindModel || !m.body.is_object()) return;
  const auto id = m.body.find("call_id");
  if (id == m.body.end() || !id->is_number_integer()) return;  // not a call: nobody to answer
  const int64_t call_id = id->get<int64_t>();
  Result<BindModel> bind = decode_bind_model(m.body);
  std::lock_guard<std::mutex> lock(mu_);
  if (!bind.ok() || bind_.has_value()) {
    BindReply r;
    r.status = bind.ok() ? Status::invalid_argument("this TE is bound already") : bind.status();
    link.reply(call_id, encode_bind_reply(r));
    return;
  }
  bind_ = std::move(*bind);
  bind_link_ = &link;
  call_id_ = call_id;
  cv_.notify_all();
}

std::optional<BindModel> BindListener::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [this] { return bind_.has_value(); });
  return bind_;
}

bool BindListener::reply(const BindReply& r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bind_link_ == nullptr) return false;
  return bind_link_->reply(call_id_, encode_bind_reply(r));
}

}  // namespace keel::cluster
