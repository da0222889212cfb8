// WeightsServer (see weights_server.h): weights_fetch calls in, chunks pushed, a reply out.
#include "cluster/weights/weights_server.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "cluster/transfer/kv_transfer_client.h"
#include "core/log.h"
#include "net/host_port.h"

namespace keel::cluster {

using Clock = std::chrono::steady_clock;

namespace {

// A read-only shared mapping of a whole file; empty when it is absent.
struct FileMap {
  const std::byte* bytes = nullptr;
  uint64_t size = 0;
  FileMap() = default;
  FileMap(const FileMap&) = delete;
  FileMap& operator=(const FileMap&) = delete;
  ~FileMap() {
    if (bytes != nullptr) ::munmap(const_cast<std::byte*>(bytes), size);
  }
};

// NotFound when there is no such file, IoError when it cannot be mapped.
Status map_file(const std::string& path, FileMap* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::not_found(path + ": no such entry");
    return Status::io_error(path + ": open: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
    ::close(fd);
    return Status::io_error(path + ": empty or unreadable");
  }
  void* m = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) return Status::io_error(path + ": mmap: " + std::strerror(errno));
  out->bytes = static_cast<const std::byte*>(m);
  out->size = static_cast<uint64_t>(st.st_size);
  return Status::ok_status();
}

Result<int64_t> parse_count(const std::string& spec, size_t colon) {
  try {
    size_t used = 0;
    const long long n = std::stoll(spec.substr(colon + 1), &used);
    if (used == spec.size() - colon - 1 && n >= 0) return static_cast<int64_t>(n);
  } catch (const std::exception&) {
  }
  return Status::invalid_argument("weights fault '" + spec + "': expected flip:N or stop:N");
}

constexpr uint64_t kWindowBytes = uint64_t{256} << 20;  // a push's bytes queued ahead

}  // namespace

Result<WeightsFaults> parse_weights_faults(const std::string& spec) {
  WeightsFaults f;
  if (spec.empty()) return f;
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  if (colon == std::string::npos || (kind != "flip" && kind != "stop")) {
    return Status::invalid_argument("weights fault '" + spec + "': expected flip:N or stop:N");
  }
  KEEL_ASSIGN_OR_RETURN(const int64_t n, parse_count(spec, colon));
  (kind == "flip" ? f.flip_chunk : f.stop_after_chunks) = n;
  return f;
}

Result<std::unique_ptr<WeightsServer>> WeightsServer::start(WeightsServerConfig config) {
  if (config.store_dir.empty()) return Status::invalid_argument("weights server: no store dir");
  std::unique_ptr<WeightsServer> server(new WeightsServer(std::move(config)));
  WeightsServer* self = server.get();
  KEEL_ASSIGN_OR_RETURN(server->server_,
                        net::LinkServer::start(server->config_.host, server->config_.port,
                                               [self](net::Link& link, net::Message m) {
                                                 self->on_message(link, std::move(m));
                                               }));
  return server;
}

WeightsServer::~WeightsServer() { stop(); }

void WeightsServer::stop() {
  {
    MutexLock lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  if (server_ != nullptr) server_->stop();   // null when start() failed to listen
  for (std::thread& t : hashers_) t.join();  // stopped_ is set: no more are added
  hashers_.clear();
}

void WeightsServer::precompute_hash(const std::string& entry) {
  MutexLock lock(mu_);
  if (stopped_) return;
  hashers_.emplace_back([this, entry] {
    FileMap file;
    if (map_file(config_.store_dir + "/" + entry, &file).ok()) {
      (void)entry_hash(entry, file.bytes, file.size);
    }
  });
}

WeightsServerStats WeightsServer::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

void WeightsServer::on_message(net::Link& link, net::Message message) {
  const auto call_id = message.body.find("call_id");
  if (message.type != kWeightsFetch || call_id == message.body.end() ||
      !call_id->is_number_integer()) {
    KEEL_LOG_WARN("weights server: unexpected message '{}' from {}", message.type, link.peer());
    return;
  }
  Result<WeightsFetchRequest> request = decode_weights_fetch(message.body);
  Result<WeightsFetchReply> reply =
      request.ok() ? serve(*request) : Result<WeightsFetchReply>(request.status());
  WeightsFetchReply r = reply.ok() ? *reply : WeightsFetchReply{reply.status(), 0, 0};
  if (!r.status.ok()) {
    KEEL_LOG_WARN("weights server: {}", r.status.to_string());
    MutexLock lock(mu_);
    ++stats_.failed;
  }
  link.reply(call_id->get<int64_t>(), encode_weights_reply(r));
}

Result<uint64_t> WeightsServer::entry_hash(const std::string& entry, const std::byte* bytes,
                                           uint64_t total) {
  {
    MutexLock lock(mu_);
    const auto it = hashes_.find(entry);
    if (it != hashes_.end()) return it->second;
  }
  const uint64_t h = frame_payload_checksum({bytes, total});  // an entry is never rewritten
  MutexLock lock(mu_);
  hashes_[entry] = h;
  return h;
}

Result<WeightsFetchReply> WeightsServer::serve(const WeightsFetchRequest& request) {
  const Clock::time_point deadline = Clock::now() + config_.deadline;
  // A probe's chunks travel under the probe identity (the receiver drops them).
  const auto as_probe = [&request] {
    WeightsFetchRequest probe = request;
    probe.entry = std::string(kWeightsProbeEntry);
    return probe;
  };
  if (request.probe_bytes > 0 && request.entry.empty()) {
    // One zero chunk, sent as every chunk of the probe (no copy, as a fork sends its mapping).
    auto zeros = std::make_shared<const std::vector<std::byte>>(request.chunk_bytes);
    KEEL_ASSIGN_OR_RETURN(WeightsFetchReply r,
                          push(as_probe(), {zeros, zeros->data(), true}, request.probe_bytes, 0));
    MutexLock lock(mu_);
    ++stats_.probes;
    return r;
  }
  if (request.entry.find('/') != std::string::npos || request.entry[0] == '.') {
    return Status::invalid_argument("weights_fetch: '" + request.entry + "' is not an entry name");
  }
  const std::string path = config_.store_dir + "/" + request.entry;
  auto file = std::make_shared<FileMap>();  // shared with the sends in flight
  Status mapped = map_file(path, file.get());
  if (request.probe_bytes > 0) {
    // An entry probe: the entry's bytes from its mapping, as a fork sends them, then dropped.
    KEEL_TRY(mapped);
    KEEL_ASSIGN_OR_RETURN(WeightsFetchReply r,
                          push(as_probe(), {file, file->bytes},
                               std::min<uint64_t>(request.probe_bytes, file->size), 0));
    MutexLock lock(mu_);
    ++stats_.probes;
    return r;
  }
  if (mapped.code() == StatusCode::kNotFound && config_.receiver != nullptr) {
    Result<WeightsFetchReply> relayed =
        config_.receiver->relay(request, deadline, config_.relay_wait);
    if (relayed.ok() || relayed.status().code() != StatusCode::kNotFound) {
      MutexLock lock(mu_);
      ++stats_.relayed;
      return relayed;
    }
    mapped = map_file(path, file.get());  // it may have completed meanwhile
  }
  KEEL_TRY(mapped);
  KEEL_ASSIGN_OR_RETURN(const uint64_t hash, entry_hash(request.entry, file->bytes, file->size));
  KEEL_ASSIGN_OR_RETURN(WeightsFetchReply r, push(request, {file, file->bytes}, file->size, hash));
  MutexLock lock(mu_);
  ++stats_.served;
  stats_.bytes += static_cast<int64_t>(r.bytes);
  return r;
}

// Pushes `total` bytes to request.reply_to — source.bytes, or (source.repeat) its one chunk again
// and again — sent from there with no copy; flushes; the reply.
Result<WeightsFetchReply> WeightsServer::push(const WeightsFetchRequest& request,
                                              const PushSource& source, uint64_t total,
                                              uint64_t hash) {
  const Clock::time_point deadline = Clock::now() + config_.deadline;
  KEEL_ASSIGN_OR_RETURN(const net::HostPort hp, net::parse_host_port(request.reply_to));
  KvTransferClientOptions options;
  options.host = hp.host;
  options.port = hp.port;
  options.max_queued_bytes = size_t{1} << 30;
  options.max_in_flight = 16;
  options.faults.throttle_bytes_per_s = config_.faults.throttle_bytes_per_s;
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<KvTransferClient> client,
                        KvTransferClient::connect(options));
  const kv::BlockHash identity = weights_stream_identity(request.entry);
  int64_t index = 0;
  for (uint64_t offset = 0; offset < total; offset += request.chunk_bytes, ++index) {
    if (config_.faults.stop_after_chunks >= 0 && index >= config_.faults.stop_after_chunks) break;
    const uint64_t n = std::min<uint64_t>(request.chunk_bytes, total - offset);
    WeightsChunkToSend block;
    block.stream_identity = identity;
    block.offset = offset;
    block.entry_bytes = total;
    block.entry_hash = hash;
    block.stream_id = request.stream_id;
    const std::byte* from = source.repeat ? source.bytes : source.bytes + offset;
    if (index == config_.faults.flip_chunk) {  // a copy: the mapping is read-only
      block.payload.assign(from, from + n);
      block.payload[n / 2] ^= std::byte{0x40};
    } else {
      block.borrowed = {from, n};
      block.owner = source.owner;
    }
    // At most kWindowBytes queued ahead of the network.
    while (true) {
      const KvTransferClientStats st = client->stats();
      const uint64_t queued =
          static_cast<uint64_t>(st.blocks_queued - st.blocks_sent - st.blocks_dropped) *
          request.chunk_bytes;
      if (queued + n <= kWindowBytes) break;
      if (Clock::now() > deadline) return Status::unavailable("weights push: timed out");
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    KEEL_TRY(client->send_weights(std::move(block)));
  }
  KEEL_TRY(client->flush(deadline));
  return WeightsFetchReply{Status(), total, hash};
}

}  // namespace keel::cluster
