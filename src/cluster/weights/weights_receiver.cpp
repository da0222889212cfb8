// WeightsReceiver (see weights_receiver.h): chunks into a partial entry, the end-of-stream checks,
// and the chain relay.
#include "cluster/weights/weights_receiver.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "cluster/weights/weights_hasher.h"
#include "core/log.h"
#include "net/host_port.h"

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
// The pre-fault's step: the file's pages are allocated this many bytes at a time.
constexpr uint64_t kPrefaultStep = uint64_t{32} << 20;
// madvise(MADV_POPULATE_WRITE) (Linux 5.14): faults pages in writable without touching content.
#ifdef MADV_POPULATE_WRITE
constexpr int kMadvPopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int kMadvPopulateWrite = 23;
#endif

}  // namespace

struct WeightsReceiver::Stream : std::enable_shared_from_this<Stream> {
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
  struct Filed {
    uint64_t bytes = 0;
    uint64_t checksum = 0;  // the frame's (verified) payload checksum
  };
  std::map<uint64_t, Filed> received;  // offset → the chunk filed there
  std::set<uint64_t> placed;           // offsets a payload was received in place at (or filed)
  uint64_t bytes = 0;
  uint64_t contiguous = 0;  // bytes [0, contiguous) are filed (what the hasher may read)
  Status failed;      // a chunk that could not be filed, or the stream's end-of-stream failure
  bool done = false;  // finished (ok: renamed into place) or failed; relays stop waiting
  struct Downstream {
    std::unique_ptr<KvTransferClient> client;
    uint64_t stream_id = 0;
    Status status;  // the first failed send
  };
  std::vector<std::shared_ptr<Downstream>> downstream;
  std::unique_ptr<WeightsHasher> hasher;  // from the first chunk on; before the mapping goes
  std::thread prefault;                   // faults the mapping's pages in ahead of the chunks
  std::atomic<bool> stop_prefault{false};

  ~Stream() {
    stop_prefault = true;
    if (prefault.joinable()) prefault.join();
    hasher.reset();
    if (map != nullptr) ::munmap(map, total);
    if (fd >= 0) ::close(fd);
  }

  // Sizes and maps the partial file for a stream of `n` bytes; starts the hasher and, off the
  // receive thread, faults the file's pages in ahead of the chunks (a page's first write then
  // costs no allocation on the receive path). Content is never touched by the pre-fault.
  Status size_to(uint64_t n, uint64_t hash) {
    if (n == 0) return Status::invalid_argument("weights stream of 0 bytes");
    if (::ftruncate(fd, static_cast<off_t>(n)) != 0) return errno_status(partial + ": ftruncate");
    void* m = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) return errno_status(partial + ": mmap");
    map = static_cast<std::byte*>(m);
    total = n;
    entry_hash = hash;
    sized = true;
    hasher = std::make_unique<WeightsHasher>(map, total);
    prefault = std::thread([this] {
      for (uint64_t off = 0; off < total && !stop_prefault.load(); off += kPrefaultStep) {
        const uint64_t len = std::min(kPrefaultStep, total - off);
        if (::madvise(map + off, len, kMadvPopulateWrite) != 0) return;  // an older kernel
      }
    });
    return Status::ok_status();
  }

  // Files a chunk already written at its offset (or copies it there); the hasher's prefix moves.
  void file(uint64_t offset, std::span<const std::byte> payload, uint64_t checksum) {
    if (payload.data() != map + offset) std::memcpy(map + offset, payload.data(), payload.size());
    received[offset] = {payload.size(), checksum};
    placed.insert(offset);
    bytes += payload.size();
    for (auto it = received.find(contiguous); it != received.end();
         it = received.find(contiguous)) {
      contiguous += it->second.bytes;
    }
    hasher->advance(contiguous);
  }

  // Sends bytes [offset, offset + n) of the mapping to one downstream, straight from the mapping
  // (the send holds this stream, so the mapping outlives it) with the checksum already verified.
  void forward(Downstream& d, uint64_t offset, const Filed& f) {
    if (!d.status.ok()) return;
    WeightsChunkToSend block;
    block.stream_identity = identity;
    block.offset = offset;
    block.entry_bytes = total;
    block.entry_hash = entry_hash;
    block.stream_id = d.stream_id;
    block.borrowed = {map + offset, f.bytes};
    block.owner = shared_from_this();
    block.payload_checksum = f.checksum;
    d.status = d.client->send_weights(std::move(block));
  }
};

Result<std::unique_ptr<WeightsReceiver>> WeightsReceiver::start(const std::string& host,
                                                                std::string store_dir) {
  if (store_dir.empty()) return Status::invalid_argument("weights receiver: no store directory");
  std::unique_ptr<WeightsReceiver> r(new WeightsReceiver(std::move(store_dir)));
  KvTransferServerOptions options;
  options.host = host;
  options.idle_timeout = std::chrono::milliseconds(30'000);
  WeightsReceiver* raw = r.get();
  KEEL_ASSIGN_OR_RETURN(
      r->server_,
      KvTransferServer::start_weights(
          options,
          [raw](const WeightsFrameHeader& h, std::span<const std::byte> p) { raw->on_chunk(h, p); },
          [raw](const WeightsFrameHeader& h) { return raw->place(h); }));
  r->address_ = host + ":" + std::to_string(r->server_->port());
  return r;
}

WeightsReceiver::~WeightsReceiver() {
  server_.reset();  // no sink call after this
  MutexLock lock(mu_);
  if (stream_) close_stream_locked(Status::cancelled("weights receiver stopped"));
}

WeightsReceiverStats WeightsReceiver::stats() const {
  MutexLock lock(mu_);
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
  MutexLock lock(mu_);
  if (stream_) return Status::unavailable("weights receiver: a stream is already open");
  s->fd = ::open(s->partial.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (s->fd < 0) return errno_status(s->partial + ": create");
  stream_ = std::move(s);
  cv_.notify_all();
  return Status::ok_status();
}

// The stream a chunk belongs to (open, not failed, its identity and stream id), or null.
WeightsReceiver::Stream* WeightsReceiver::stream_for_locked(const WeightsFrameHeader& header,
                                                            const WeightsChunk& c,
                                                            uint64_t payload_bytes) {
  Stream* s = stream_.get();
  if (s == nullptr || s->done || !s->failed.ok() || header.stream_identity != s->identity ||
      c.stream_id != s->stream_id || !check_weights_chunk(c, payload_bytes).ok()) {
    return nullptr;
  }
  return s;
}

PayloadPlacement WeightsReceiver::place(const WeightsFrameHeader& header) {
  const WeightsChunk c = weights_chunk_of(header);
  MutexLock lock(mu_);
  Stream* s = stream_for_locked(header, c, header.payload_bytes);
  if (s == nullptr || !size_stream_locked(*s, c) || s->placed.count(c.offset) != 0) return {};
  s->placed.insert(c.offset);  // one payload in place per offset: filed bytes never change
  return {s->map + c.offset, stream_};
}

bool WeightsReceiver::size_stream_locked(Stream& s, const WeightsChunk& c) {
  if (!s.sized) {
    if (Status st = s.size_to(c.total_bytes, c.entry_hash); !st.ok()) {
      s.failed = st;
      cv_.notify_all();
      return false;
    }
  } else if (c.total_bytes != s.total || c.entry_hash != s.entry_hash) {
    s.failed = Status::corrupt("weights stream for " + s.entry +
                               ": a chunk disagrees on the entry's size or hash");
    cv_.notify_all();
    return false;
  }
  return true;
}

void WeightsReceiver::on_chunk(const WeightsFrameHeader& header,
                               std::span<const std::byte> payload) {
  static const kv::BlockHash kProbe = weights_stream_identity(kWeightsProbeEntry);
  const WeightsChunk c = weights_chunk_of(header);
  MutexLock lock(mu_);
  if (header.stream_identity == kProbe) {
    stats_.probe_bytes += static_cast<int64_t>(payload.size());
    return;
  }
  Stream* s = stream_for_locked(header, c, payload.size());
  if (s == nullptr) {
    ++stats_.rejected;
    return;
  }
  if (!size_stream_locked(*s, c) || s->received.count(c.offset) != 0) return;  // or a duplicate
  s->file(c.offset, payload, header.payload_checksum);
  ++stats_.chunks;
  stats_.bytes += static_cast<int64_t>(payload.size());
  if (payload.data() == s->map + c.offset) ++stats_.in_place_chunks;
  for (const auto& d : s->downstream) {
    s->forward(*d, c.offset, s->received[c.offset]);
    ++stats_.relayed_chunks;
  }
  cv_.notify_all();
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
  MutexLock lock(mu_);
  if (stream_) close_stream_locked(why.ok() ? Status::cancelled("weights stream aborted") : why);
}

Result<std::string> WeightsReceiver::finish(const WeightsFetchReply& reply,
                                            Clock::time_point deadline) {
  UniqueLock lock(mu_);
  if (!stream_) return Status::unavailable("weights receiver: no open stream");
  const std::shared_ptr<Stream> keep = stream_;  // the mapping stays while this runs
  Stream* s = keep.get();
  auto fail = [&](Status why) {
    mu_.assert_held();  // every call below holds the lock
    close_stream_locked(why);
    return why;
  };
  if (!reply.status.ok()) {
    return fail(Status(reply.status.code(), "weights stream for " + s->entry +
                                                ": the peer failed: " + reply.status.message()));
  }
  // The peer replied after its flush: its bytes are here or about to be filed (a grace for the
  // receive callbacks still running), not on their way.
  cv_.wait_until(lock.native(), std::min(deadline, Clock::now() + kFinishGrace), [&] {
    return !s->failed.ok() || (s->sized && s->bytes >= s->total && s->total == reply.bytes);
  });
  if (!s->failed.ok()) return fail(s->failed);
  if (!s->sized || s->total != reply.bytes || s->bytes < s->total) {
    return fail(Status::corrupt("weights stream for " + s->entry +
                                " truncated: " + std::to_string(s->bytes) + " of " +
                                std::to_string(reply.bytes) + " bytes arrived"));
  }
  // Every byte is in: the hasher, which followed the stream, has at most the tail left.
  lock.unlock();
  Result<uint64_t> hashed = s->hasher->result(deadline);
  lock.lock();
  if (stream_ != keep) return Status::cancelled("weights stream for " + s->entry + ": aborted");
  if (!hashed.ok()) return fail(hashed.status());
  const uint64_t hash = *hashed;
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
    UniqueLock lock(mu_);
    cv_.wait_until(lock.native(), std::min(deadline, Clock::now() + begin_wait), [&] {
      mu_.assert_held();  // a wait's predicate runs under its lock
      return stream_ && stream_->entry == request.entry;
    });
    if (!stream_ || stream_->entry != request.entry) {
      return Status::not_found("no entry " + request.entry + " here, nor one arriving");
    }
    s = stream_;
  }
  KEEL_ASSIGN_OR_RETURN(const net::HostPort hp, net::parse_host_port(request.reply_to));
  KvTransferClientOptions options;
  options.host = hp.host;
  options.port = hp.port;
  options.max_queued_bytes = kRelayQueueBytes;
  options.max_in_flight = 16;
  auto d = std::make_shared<Stream::Downstream>();
  d->stream_id = request.stream_id;
  KEEL_ASSIGN_OR_RETURN(d->client, KvTransferClient::connect(options));
  std::map<uint64_t, Stream::Filed> already;
  {
    MutexLock lock(mu_);
    if (s->done && !s->failed.ok()) return s->failed;
    already = s->received;  // sent below; every later chunk is forwarded by the sink
    s->downstream.push_back(d);
  }
  for (const auto& [offset, filed] : already) {
    MutexLock lock(mu_);  // forward() writes d->status, which the sink also touches
    s->forward(*d, offset, filed);
    ++stats_.relayed_chunks;
  }
  Status status;
  {
    UniqueLock lock(mu_);
    cv_.wait_until(lock.native(), deadline, [&] { return s->done; });
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
