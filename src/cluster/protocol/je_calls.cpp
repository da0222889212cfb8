// call_jes (see je_calls.h).
#include "cluster/protocol/je_calls.h"

#include "cluster/protocol/messages.h"

namespace keel::cluster {

Status call_jes(const std::vector<std::string>& je_addresses, const net::Message& message,
                std::chrono::milliseconds timeout) {
  Status first;
  for (const std::string& je : je_addresses) {
    Result<std::shared_ptr<net::Link>> link = net::Link::connect(
        je, std::chrono::milliseconds(5000), [](net::Link&, net::Message) {}, nullptr);
    Status s = link.status();
    if (link.ok()) {
      Result<Json> reply = (*link)->call(message, timeout);
      (*link)->close();
      s = reply.ok() ? decode_status_body(*reply) : reply.status();
    }
    if (!s.ok() && s.code() != StatusCode::kNotFound && first.ok()) {
      first = Status(s.code(), "je " + je + ": " + s.message());
    }
  }
  return first;
}

}  // namespace keel::cluster
