// WeightsReceiver (see weights_receiver.h): chunks into a partial entry, the end-of-stream checks,
// and the chain relay.
#include "cluster/weights_receiver.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "cluster/host_port.h"
#include "core/log.h"

namespace keel::cluster {

using Clock = std::chrono::steady_clock;

namespace {

Status errno_status(const std::string& what) {
  return Status::io_error(what + ": " + std::strerror(errno));
}

// Queued copies a relay may hold for a slow downstream (the whole entry of a 7B Q4 model fits).
constexpr size_t kRelayQueueBytes = size_t{8} << 30;
// How long finish() waits, after the peer's reply, for the last chunks' receive callbacks.
constexpr std::chrono::seconds kFinishGrace{2};

}  // namespace

struct WeightsReceiver::Stream {
  std::string entry;
  uint64_t stream_id = 0;
  kv::BlockHash identity;
  std::string partial;     // ".<entry>.partial.<pid>" in the store directory
  std::string final_path;  // "<store dir>/<entry>"
  int fd = -1;
  std::byte* map = nullptr;  // `total` bytes, once the first chunk sized the file
  bool sized = false;
  uint64_t total = 0;
  uint64_t entry_hash = 0;
  std::map<uint64_t, uint64_t> received;  // offset → bytes
  uint64_t bytes = 0;
  Status failed;      // a chunk that could not be filed, or the stream's end-of-stream failure
  bool done = false;  // finished (ok: renamed into place) or failed; relays stop waiting
  struct Downstream {
    std::unique_ptr<KvTransferClient> client;
    uint64_t stream_id = 0;
    Status status;  // the first failed send
  };
  std::vector<std::shared_ptr<Downstream>> downstream;

  ~Stream() {
    if (map != nullptr) ::munmap(map, total);
    if (fd >= 0) ::close(fd);
  }

  // Sizes and maps the partial file for a stream of `n` bytes.
  Status size_to(uint64_t n, uint64_t hash) {
    if (n == 0) return Status::invalid_argument("weights stream of 0 bytes");
    if (::ftruncate(fd, static_cast<off_t>(n)) != 0) return errno_status(partial + ": ftruncate");
    void* m = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) return errno_status(partial + ": mmap");
    map = static_cast<std::byte*>(m);
    total = n;
    entry_hash = hash;
    sized = true;
    return Status::ok_status();
  }

  // Sends bytes [offset, offset + n) of the mapping to one downstream.
  void forward(Downstream& d, uint64_t offset, uint64_t n) const {
    if (!d.status.ok()) return;
    KvBlockToSend block;
    block.flags = kKvFrameFlagWeights;
    put_weights_chunk({offset, total, entry_hash, d.stream_id}, &block.block_hash,
                      &block.parent_hash);
    block.payload.assign(map + offset, map + offset + n);
    d.status = d.client->send(std::move(block));
  }
};

Result<std::unique_ptr<WeightsReceiver>> WeightsReceiver::start(const std::string& host,
                                                                std::string store_dir) {
  if (store_dir.empty()) return Status::invalid_argument("weights receiver: no store directory");
  std::unique_ptr<WeightsReceiver> r(new WeightsReceiver(std::move(store_dir)));
  KvTransferServerOptions options;
  options.host = host;
  options.weights = true;
  options.idle_timeout = std::chrono::milliseconds(30'000);
  WeightsReceiver* raw = r.get();
  KEEL_ASSIGN_OR_RETURN(
      r->server_,
      KvTransferServer::start(options, [raw](const KvFrameHeader& h, std::span<const std::byte> p) {
        raw->on_chunk(h, p);
      }));
  r->address_ = host + ":" + std::to_string(r->server_->port());
  return r;
}

WeightsReceiver::~WeightsReceiver() {
  server_.reset();  // no sink call after this
  std::lock_guard lock(mu_);
  if (stream_) close_stream_locked(Status::cancelled("weights receiver stopped"));
}

WeightsReceiverStats WeightsReceiver::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

Status WeightsReceiver::begin(const std::string& entry, uint64_t stream_id) {
  if (entry.empty() || entry.find('/') != std::string::npos || entry[0] == '.') {
    return Status::invalid_argument("weights stream: '" + entry + "' is not an entry name");
  }
  auto s = std::make_shared<Stream>();
  s->entry = entry;
  s->stream_id = stream_id;
  s->identity = weights_stream_identity(entry);
  s->final_path = store_dir_ + "/" + entry;
  s->partial = store_dir_ + "/." + entry + ".partial." + std::to_string(::getpid());
  std::lock_guard lock(mu_);
  if (stream_) return Status::unavailable("weights receiver: a stream is already open");
  s->fd = ::open(s->partial.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (s->fd < 0) return errno_status(s->partial + ": create");
  stream_ = std::move(s);
  cv_.notify_all();
  return Status::ok_status();
}

void WeightsReceiver::on_chunk(const KvFrameHeader& header, std::span<const std::byte> payload) {
  static const kv::BlockHash kProbe = weights_stream_identity(kWeightsProbeEntry);
  const WeightsChunk c = weights_chunk_of(header);
  std::lock_guard lock(mu_);
  if (header.kv_identity == kProbe) {
    stats_.probe_bytes += static_cast<int64_t>(payload.size());
    return;
  }
  Stream* s = stream_.get();
  if (s == nullptr || s->done || !s->failed.ok() || header.kv_identity != s->identity ||
      c.stream_id != s->stream_id || !check_weights_chunk(c, payload.size()).ok()) {
    ++stats_.rejected;
    return;
  }
  file_chunk(*s, c, payload);
  cv_.notify_all();
}

void WeightsReceiver::file_chunk(Stream& s, const WeightsChunk& c,
                                 std::span<const std::byte> payload) {
  if (!s.sized) {
    if (Status st = s.size_to(c.total_bytes, c.entry_hash); !st.ok()) {
      s.failed = st;
      return;
    }
  } else if (c.total_bytes != s.total || c.entry_hash != s.entry_hash) {
    s.failed = Status::corrupt("weights stream for " + s.entry +
                               ": a chunk disagrees on the entry's size or hash");
    return;
  }
  if (s.received.count(c.offset) != 0) return;  // a duplicate
  std::memcpy(s.map + c.offset, payload.data(), payload.size());
  s.received[c.offset] = payload.size();
  s.bytes += payload.size();
  ++stats_.chunks;
  stats_.bytes += static_cast<int64_t>(payload.size());
  for (const auto& d : s.downstream) {
    s.forward(*d, c.offset, payload.size());
    ++stats_.relayed_chunks;
  }
}

void WeightsReceiver::close_stream_locked(const Status& why) {
  if (!why.ok()) {
    stream_->failed = why;
    ::unlink(stream_->partial.c_str());
  }
  stream_->done = true;
  stream_.reset();
  cv_.notify_all();
}

void WeightsReceiver::abort(const Status& why) {
  std::lock_guard lock(mu_);
  if (stream_) close_stream_locked(why.ok() ? Status::cancelled("weights stream aborted") : why);
}

Result<std::string> WeightsReceiver::finish(const WeightsFetchReply& reply,
                                            Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  if (!stream_) return Status::unavailable("weights receiver: no open stream");
  const std::shared_ptr<Stream> keep = stream_;  // the mapping stays while this runs
  Stream* s = keep.get();
  auto fail = [&](Status why) {
    close_stream_locked(why);
    return why;
  };
  if (!reply.status.ok()) {
    return fail(Status(reply.status.code(), "weights stream for " + s->entry +
                                                ": the peer failed: " + reply.status.message()));
  }
  // The peer replied after its flush: its bytes are here or about to be filed (a grace for the
  // receive callbacks still running), not on their way.
  cv_.wait_until(lock, std::min(deadline, Clock::now() + kFinishGrace), [&] {
    return !s->failed.ok() || (s->sized && s->bytes >= s->total && s->total == reply.bytes);
  });
  if (!s->failed.ok()) return fail(s->failed);
  if (!s->sized || s->total != reply.bytes || s->bytes < s->total) {
    return fail(Status::corrupt("weights stream for " + s->entry +
                                " truncated: " + std::to_string(s->bytes) + " of " +
                                std::to_string(reply.bytes) + " bytes arrived"));
  }
  // Every byte is in: no chunk writes any more (duplicates are skipped), so hash unlocked.
  lock.unlock();
  const uint64_t hash = frame_payload_checksum({s->map, s->total});
  lock.lock();
  if (stream_ != keep) return Status::cancelled("weights stream for " + s->entry + ": aborted");
  if (hash != reply.entry_hash || hash != s->entry_hash) {
    return fail(Status::corrupt("weights stream for " + s->entry +
                                ": content hash mismatch (the entry's bytes changed in transit)"));
  }
  if (::fchmod(s->fd, 0444) != 0) return fail(errno_status(s->partial + ": chmod 0444"));
  if (::rename(s->partial.c_str(), s->final_path.c_str()) != 0) {
    return fail(errno_status(s->partial + ": rename"));
  }
  std::string path = s->final_path;
  close_stream_locked(Status::ok_status());
  return path;
}

Result<WeightsFetchReply> WeightsReceiver::relay(const WeightsFetchRequest& request,
                                                 Clock::time_point deadline,
                                                 std::chrono::milliseconds begin_wait) {
  std::shared_ptr<Stream> s;
  {
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, std::min(deadline, Clock::now() + begin_wait),
                   [&] { return stream_ && stream_->entry == request.entry; });
    if (!stream_ || stream_->entry != request.entry) {
      return Status::not_found("no entry " + request.entry + " here, nor one arriving");
    }
    s = stream_;
  }
  KEEL_ASSIGN_OR_RETURN(const HostPort hp, parse_host_port(request.reply_to));
  KvTransferClientOptions options;
  options.host = hp.host;
  options.port = hp.port;
  options.kv_identity = s->identity;
  options.max_queued_bytes = kRelayQueueBytes;
  options.max_in_flight = 16;
  auto d = std::make_shared<Stream::Downstream>();
  d->stream_id = request.stream_id;
  KEEL_ASSIGN_OR_RETURN(d->client, KvTransferClient::connect(options));
  std::map<uint64_t, uint64_t> already;
  {
    std::lock_guard lock(mu_);
    if (s->done && !s->failed.ok()) return s->failed;
    already = s->received;  // sent below; every later chunk is forwarded by the sink
    s->downstream.push_back(d);
  }
  for (const auto& [offset, n] : already) {
    std::lock_guard lock(mu_);  // forward() writes d->status, which the sink also touches
    s->forward(*d, offset, n);
  }
  Status status;
  {
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, deadline, [&] { return s->done; });
    status =
        !s->done ? Status::unavailable("weights relay of " + s->entry + ": timed out") : s->failed;
    std::erase(s->downstream, d);
    if (status.ok()) status = d->status;
  }
  if (status.ok()) status = d->client->flush(deadline);
  WeightsFetchReply reply;
  reply.status = status;
  reply.bytes = status.ok() ? s->total : 0;
  reply.entry_hash = s->entry_hash;
  return reply;
}

}  // namespace keel::cluster
