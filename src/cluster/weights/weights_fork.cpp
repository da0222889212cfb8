// fork_entry / probe_weights_link (see weights_fork.h).
#include "cluster/weights/weights_fork.h"

#include <unistd.h>

#include <random>

#include "net/link.h"

namespace keel::cluster {

using Clock = std::chrono::steady_clock;

namespace {

Result<WeightsFetchReply> call_peer(const std::string& peer, const WeightsFetchRequest& request,
                                    std::chrono::milliseconds timeout) {
  KEEL_ASSIGN_OR_RETURN(
      std::shared_ptr<net::Link> link,
      net::Link::connect(
          peer, std::chrono::milliseconds(5000), [](net::Link&, net::Message) {}, nullptr));
  Result<Json> body = link->call(encode(request), timeout);
  link->close();
  if (!body.ok()) return body.status();
  return decode_weights_reply(*body);
}

}  // namespace

Result<ForkResult> fork_entry(const std::string& peer, const std::string& entry,
                              WeightsReceiver* receiver, std::chrono::milliseconds timeout,
                              uint64_t chunk_bytes) {
  const Clock::time_point start = Clock::now();
  std::random_device rd;
  WeightsFetchRequest request;
  request.entry = entry;
  request.reply_to = receiver->address();
  request.stream_id = (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(::getpid());
  request.chunk_bytes = chunk_bytes;
  KEEL_TRY(receiver->begin(entry, request.stream_id));
  Result<WeightsFetchReply> reply = call_peer(peer, request, timeout);
  if (!reply.ok()) {
    const Status why(reply.status().code(),
                     "fork of " + entry + " from " + peer + ": " + reply.status().message());
    receiver->abort(why);
    return why;
  }
  KEEL_ASSIGN_OR_RETURN(std::string path, receiver->finish(*reply, start + timeout));
  ForkResult r;
  r.path = std::move(path);
  r.bytes = reply->bytes;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

Result<double> probe_weights_link(const std::string& peer, WeightsReceiver* receiver,
                                  uint64_t bytes, std::chrono::milliseconds timeout,
                                  uint64_t chunk_bytes, const std::string& entry) {
  const Clock::time_point start = Clock::now();
  WeightsFetchRequest request;
  request.entry = entry;
  request.reply_to = receiver->address();
  request.chunk_bytes = chunk_bytes;
  request.probe_bytes = bytes;
  KEEL_ASSIGN_OR_RETURN(WeightsFetchReply reply, call_peer(peer, request, timeout));
  KEEL_TRY(reply.status);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace keel::cluster
