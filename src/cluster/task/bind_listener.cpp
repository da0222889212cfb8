// BindListener (see bind_listener.h).
#include "cluster/task/bind_listener.h"

namespace keel::cluster {

Result<std::unique_ptr<BindListener>> BindListener::start(const std::string& host) {
  std::unique_ptr<BindListener> b(new BindListener());
  BindListener* self = b.get();
  KEEL_ASSIGN_OR_RETURN(b->server_,
                        net::LinkServer::start(host, 0, [self](net::Link& link, net::Message m) {
                          self->on_message(link, std::move(m));
                        }));
  return b;
}

BindListener::~BindListener() { server_->stop(); }  // its links' handlers use mu_

void BindListener::on_message(net::Link& link, net::Message m) {
  if (m.type != kBindModel || !m.body.is_object()) return;
  const auto id = m.body.find("call_id");
  if (id == m.body.end() || !id->is_number_integer()) return;  // not a call: nobody to answer
  const int64_t call_id = id->get<int64_t>();
  Result<BindModel> bind = decode_bind_model(m.body);
  MutexLock lock(mu_);
  if (!bind.ok() || bind_.has_value()) {
    BindReply r;
    r.status = bind.ok() ? Status::invalid_argument("this TE is bound already") : bind.status();
    link.reply(call_id, encode_bind_reply(r));
    return;
  }
  bind_ = std::move(*bind);
  bind_link_ = link.shared_from_this();
  call_id_ = call_id;
  cv_.notify_all();
}

std::optional<BindModel> BindListener::wait(std::chrono::milliseconds timeout) {
  UniqueLock lock(mu_);
  cv_.wait_for(lock.native(), timeout, [this] {
    mu_.assert_held();
    return bind_.has_value();
  });
  return bind_;
}

bool BindListener::reply(const BindReply& r) {
  MutexLock lock(mu_);
  if (bind_link_ == nullptr) return false;
  return bind_link_->reply(call_id_, encode_bind_reply(r));
}

Result<BindReply> bind_warm_te(const std::string& host, int port, const BindModel& bind,
                               std::chrono::milliseconds timeout) {
  KEEL_ASSIGN_OR_RETURN(std::shared_ptr<net::Link> link,
                        net::Link::connect(
                            host + ":" + std::to_string(port), std::chrono::milliseconds(5000),
                            [](net::Link&, net::Message) {}, [](net::Link&) {}));
  Result<Json> body = link->call(encode_bind_model(bind), timeout);
  link->close();
  if (!body.ok()) return body.status();
  return decode_bind_reply(*body);
}

}  // namespace keel::cluster
