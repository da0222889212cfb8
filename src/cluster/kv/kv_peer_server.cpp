// KvPeerServer (see kv_peer_server.h): kv_fetch calls in, blocks pushed back, a reply out.
#include "cluster/kv/kv_peer_server.h"

#include <thread>
#include <utility>

#include "core/log.h"
#include "net/host_port.h"

namespace keel::cluster {

using Clock = std::chrono::steady_clock;

Status KvPeerServerConfig::validate() const {
  if (block_bytes == 0) return Status::invalid_argument("kv peer server: block_bytes must be > 0");
  if (block_tokens == 0)
    return Status::invalid_argument("kv peer server: block_tokens must be > 0");
  if (!read_block) return Status::invalid_argument("kv peer server: no read_block");
  if (throttle_bytes_per_s < 0)
    return Status::invalid_argument("kv peer server: negative throttle");
  if (deadline.count() <= 0)
    return Status::invalid_argument("kv peer server: deadline must be > 0");
  return Status::ok_status();
}

Result<std::unique_ptr<KvPeerServer>> KvPeerServer::start(KvPeerServerConfig config) {
  KEEL_TRY(config.validate());
  std::unique_ptr<KvPeerServer> server(new KvPeerServer(std::move(config)));
  KvPeerServer* self = server.get();
  KEEL_ASSIGN_OR_RETURN(server->server_,
                        net::LinkServer::start(server->config_.host, server->config_.port,
                                               [self](net::Link& link, net::Message m) {
                                                 self->on_message(link, std::move(m));
                                               }));
  return server;
}

KvPeerServer::~KvPeerServer() { stop(); }

void KvPeerServer::stop() {
  if (server_ != nullptr) server_->stop();  // null when start() failed to listen
  MutexLock lock(serve_mu_);
  clients_.clear();
}

KvPeerServerStats KvPeerServer::stats() const {
  MutexLock lock(stats_mu_);
  return stats_;
}

void KvPeerServer::on_message(net::Link& link, net::Message message) {
  const auto call_id = message.body.find("call_id");
  if (message.type != msg::kKvFetch || call_id == message.body.end() ||
      !call_id->is_number_integer()) {
    KEEL_LOG_WARN("kv peer server: unexpected message '{}' from {}", message.type, link.peer());
    return;
  }
  const int64_t call = call_id->get<int64_t>();
  Result<KvFetchRequest> request = decode_kv_fetch(message.body);
  Result<int64_t> pushed = request.ok() ? serve(*request) : Result<int64_t>(request.status());
  {
    MutexLock lock(stats_mu_);
    if (!pushed.ok()) {
      ++stats_.refused;
    } else if (request->probe_blocks > 0 || request->block_hashes.empty()) {
      ++stats_.probes;
    } else {
      ++stats_.fetches;
      stats_.blocks_served += *pushed;
    }
  }
  Json body = status_body(pushed.ok() ? Status() : pushed.status());
  body["blocks"] = pushed.ok() ? *pushed : 0;
  link.reply(call, std::move(body));
}

Result<KvTransferClient*> KvPeerServer::client(const std::string& destination) {
  const auto it = clients_.find(destination);
  if (it != clients_.end()) return it->second.get();
  KEEL_ASSIGN_OR_RETURN(const net::HostPort hp, net::parse_host_port(destination));
  KvTransferClientOptions options;
  options.host = hp.host;
  options.port = hp.port;
  options.kv_identity = config_.kv_identity;
  options.connect_timeout = config_.deadline;
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<KvTransferClient> c, KvTransferClient::connect(options));
  KvTransferClient* raw = c.get();
  clients_[destination] = std::move(c);
  return raw;
}

Result<int64_t> KvPeerServer::serve(const KvFetchRequest& request) {
  if (request.kv_identity != config_.kv_identity) {
    return Status::invalid_argument("kv peer server: the request is for another engine identity");
  }
  MutexLock lock(serve_mu_);
  const Clock::time_point start = Clock::now();
  KEEL_ASSIGN_OR_RETURN(KvTransferClient * c, client(request.reply_to));
  const bool probe = request.probe_blocks > 0;
  const size_t n = probe ? static_cast<size_t>(request.probe_blocks) : request.block_hashes.size();
  kv::BlockHash parent = probe ? kv::kRootHash : request.parent_hash;
  int64_t pushed = 0;
  double bytes = 0;
  Status status;
  for (size_t i = 0; i < n && status.ok(); ++i) {
    KvBlockToSend block;
    block.block_hash = probe ? kPeerProbeHash : request.block_hashes[i];
    block.parent_hash = parent;
    block.num_tokens = config_.block_tokens;
    block.payload.resize(config_.block_bytes);  // a probe's payload: zeros
    if (!probe && !config_.read_block(block.block_hash, block.payload).ok()) break;
    parent = block.block_hash;
    bytes += static_cast<double>(block.payload.size());
    if (config_.throttle_bytes_per_s > 0) {
      std::this_thread::sleep_until(
          start + std::chrono::duration_cast<Clock::duration>(
                      std::chrono::duration<double>(bytes / config_.throttle_bytes_per_s)));
    }
    status = c->send(std::move(block));
    if (status.ok()) ++pushed;
  }
  if (status.ok()) status = c->flush(start + config_.deadline);
  if (!status.ok()) {
    clients_.erase(request.reply_to);  // reconnect next time
    return status;
  }
  return pushed;
}

}  // namespace keel::cluster
