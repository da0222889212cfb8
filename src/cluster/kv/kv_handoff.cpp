// KvHandoff (see kv_handoff.h): the handoff thread — stream caught blocks as they come, finish
// with what is left, flush, report.
#include "cluster/kv/kv_handoff.h"

#include <charconv>
#include <cstdlib>
#include <utility>

#include "cluster/health/kv_link_probe.h"
#include "core/log.h"
#include "engine/model_identity.h"
#include "net/host_port.h"

namespace keel::cluster {

std::optional<KvHandoffMode> parse_kv_handoff_mode(std::string_view name) {
  if (name == "stream") return KvHandoffMode::kStream;
  if (name == "after") return KvHandoffMode::kAfter;
  return std::nullopt;
}

std::string_view kv_handoff_mode_name(KvHandoffMode mode) {
  switch (mode) {
    case KvHandoffMode::kStream:
      return "stream";
    case KvHandoffMode::kAfter:
      return "after";
  }
  return "?";
}

Result<KvTransferFaults> parse_kv_transfer_faults(std::string_view spec) {
  KvTransferFaults faults;
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    const size_t colon = item.find(':');
    const std::string_view name = item.substr(0, colon);
    const std::string_view value =
        colon == std::string_view::npos ? std::string_view{} : item.substr(colon + 1);
    int64_t n = -1;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (value.empty() || ec != std::errc{} || end != value.data() + value.size() || n < 0) {
      return Status::invalid_argument(
          "kv transfer fault \"" + std::string(item) +
          "\": want drop:N, corrupt:N, stall:N or throttle:N with N >= 0");
    }
    if (name == "drop") {
      faults.drop_frame = n;
    } else if (name == "corrupt") {
      faults.corrupt_frame = n;
    } else if (name == "stall") {
      faults.stall_after_frames = n;
    } else if (name == "throttle" && n > 0) {
      faults.throttle_bytes_per_s = static_cast<double>(n);
    } else {
      return Status::invalid_argument("kv transfer fault \"" + std::string(item) +
                                      "\": unknown kind (drop, corrupt, stall, throttle:N > 0)");
    }
  }
  return faults;
}

engine::PublishedBlockTap handoff_tap(KvHandoffStreams* streams) {
  return {[streams](const kv::BlockHash& h) { return streams->wants(h); },
          [streams](const kv::BlockHash& h, std::span<const std::byte> payload) {
            streams->catch_block(h, payload);
          }};
}

KvHandoff::KvHandoff(KvHandoffConfig config) : config_(std::move(config)) {
  if (config_.mode == KvHandoffMode::kStream && config_.streams != nullptr) {
    config_.streams->set_on_caught([this] {
      MutexLock lock(mu_);
      caught_ = true;
      cv_.notify_all();
    });
  }
  thread_ = std::thread([this] { run(); });
}

KvHandoff::~KvHandoff() {
  if (config_.streams != nullptr) config_.streams->set_on_caught({});
  {
    MutexLock lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  thread_.join();
}

int64_t KvHandoff::begin(const std::vector<int32_t>& prompt, const std::string& cache_salt,
                         std::string destination) {
  Handoff h;
  h.keys = engine::prefix_block_hashes(config_.model_key, cache_salt, prompt, config_.block_size);
  h.destination = std::move(destination);
  MutexLock lock(mu_);
  const int64_t id = next_id_++;
  // Watching starts now, before the engine sees the request: no published block is missed.
  if (config_.mode == KvHandoffMode::kStream && config_.streams != nullptr) {
    config_.streams->open(id, h.keys);
  }
  commands_.push_back(Command{Command::Kind::kBegin, id, std::move(h), {}, {}});
  cv_.notify_all();
  return id;
}

void KvHandoff::finish(int64_t id, Clock::time_point prefill_end, Done done) {
  MutexLock lock(mu_);
  commands_.push_back(Command{Command::Kind::kFinish, id, {}, prefill_end, std::move(done)});
  cv_.notify_all();
}

void KvHandoff::abandon(int64_t id) {
  MutexLock lock(mu_);
  commands_.push_back(Command{Command::Kind::kAbandon, id, {}, {}, {}});
  cv_.notify_all();
}

void KvHandoff::run() {
  while (true) {
    std::deque<Command> commands;
    {
      UniqueLock lock(mu_);
      cv_.wait(lock.native(), [&] {
        mu_.assert_held();  // a wait's predicate runs under its lock
        return stopping_ || caught_ || !commands_.empty();
      });
      if (stopping_ && commands_.empty()) break;
      caught_ = false;
      commands.swap(commands_);
    }
    for (Command& c : commands) {
      switch (c.kind) {
        case Command::Kind::kBegin:
          open_[c.id] = std::move(c.begin);
          break;
        case Command::Kind::kFinish: {
          send_caught();  // in order: what was caught before the end goes first
          const auto it = open_.find(c.id);
          if (it == open_.end()) break;
          complete(c.id, it->second, c);
          open_.erase(it);
          break;
        }
        case Command::Kind::kAbandon:
          if (config_.streams != nullptr) config_.streams->close(c.id);
          open_.erase(c.id);
          break;
      }
    }
    send_caught();
  }
  for (const auto& [id, h] : open_) {
    if (config_.streams != nullptr) config_.streams->close(id);
  }
}

void KvHandoff::send_caught() {
  if (config_.mode != KvHandoffMode::kStream || config_.streams == nullptr) return;
  for (auto& [id, h] : open_) {
    for (CaughtBlock& b : config_.streams->take(id)) {
      send(h, KvBlockToSend{b.hash, b.parent, static_cast<uint32_t>(config_.block_size),
                            std::move(b.payload)});
    }
  }
}

Result<KvHandoff::Connection*> KvHandoff::connection(const std::string& destination) {
  const auto it = clients_.find(destination);
  if (it != clients_.end()) return &it->second;
  KEEL_ASSIGN_OR_RETURN(const net::HostPort hp, net::parse_host_port(destination));
  KvTransferClientOptions options;
  options.host = hp.host;
  options.port = hp.port;
  options.kv_identity = config_.kv_identity;
  options.faults = config_.faults;
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<KvTransferClient> c, KvTransferClient::connect(options));
  Connection& conn = clients_[destination];
  conn.client = std::move(c);
  conn.serial = next_serial_++;
  return &conn;
}

void KvHandoff::send(Handoff& h, KvBlockToSend block) {
  KvHandoffResult& r = h.result;
  if (!r.status.ok()) return;  // failed before: the decode side recomputes the rest
  Result<Connection*> conn = connection(h.destination);
  if (!conn.ok()) {
    r.status = conn.status();
    return;
  }
  // Blocks of one handoff must all go over one connection: a flush covers only its own.
  if (h.connection >= 0 && h.connection != (*conn)->serial) {
    r.status = Status::unavailable("kv handoff: the connection failed mid-stream");
    return;
  }
  h.connection = (*conn)->serial;
  const size_t bytes = block.payload.size();
  r.status = (*conn)->client->send(std::move(block));
  if (!r.status.ok()) {
    clients_.erase(h.destination);  // reconnect next time
    return;
  }
  ++r.blocks;
  r.bytes += static_cast<int64_t>(bytes);
}

void KvHandoff::complete(int64_t id, Handoff& h, const Command& c) {
  KvHandoffResult& r = h.result;
  r.streamed = r.blocks;
  // What is left: in stream mode the keys the tap never caught (published before this prefill,
  // or evicted first), in after mode every key; read in prompt order, stopping at the first
  // block the engine no longer holds (the decode side recomputes from there).
  std::vector<int32_t> left;
  if (config_.mode == KvHandoffMode::kStream && config_.streams != nullptr) {
    left = config_.streams->close(id);
  } else {
    for (size_t i = 0; i < h.keys.size(); ++i) left.push_back(static_cast<int32_t>(i));
  }
  for (const int32_t i : left) {
    if (!r.status.ok()) break;
    KvBlockToSend block;
    block.block_hash = h.keys[static_cast<size_t>(i)];
    block.parent_hash = i == 0 ? kv::kRootHash : h.keys[static_cast<size_t>(i) - 1];
    block.num_tokens = static_cast<uint32_t>(config_.block_size);
    block.payload.resize(config_.block_bytes);
    if (!config_.read_block(block.block_hash, block.payload).ok()) break;
    send(h, std::move(block));
  }
  if (r.status.ok() && h.connection >= 0) {
    const auto it = clients_.find(h.destination);
    if (it == clients_.end() || it->second.serial != h.connection) {
      r.status = Status::unavailable("kv handoff: the connection failed mid-stream");
    } else {
      r.status = flush_probed(*it->second.client, &r);
      if (!r.status.ok()) clients_.erase(it);
    }
  }
  r.exposed_seconds = std::chrono::duration<double>(Clock::now() - c.prefill_end).count();
  if (c.done) c.done(r);
}

}  // namespace keel::cluster

namespace keel::cluster {

// Flushes in slices, probing the link between them (kv_link_probe.h): a delayed link is waited
// for up to the deadline, a blocked one (no block sent for blocked_after) is given up at once.
Status KvHandoff::flush_probed(KvTransferClient& client, KvHandoffResult* r) {
  const Clock::time_point deadline = Clock::now() + config_.deadline;
  KvLinkWatch watch(client.stats().blocks_sent, Clock::now());
  const auto slice = std::max(std::chrono::milliseconds(10), config_.blocked_after / 10);
  while (true) {
    const Clock::time_point now = Clock::now();
    Status s = client.flush(std::min(deadline, now + slice));
    if (s.ok() || now + slice >= deadline) return s;
    if (s.message() != kKvFlushTimedOut) return s;  // the connection failed
    if (watch.sample(client.stats().blocks_sent, Clock::now(), config_.blocked_after) ==
        KvLinkState::kBlocked) {
      r->link_blocked = true;
      return Status::unavailable("kv handoff: link blocked (no block moved for " +
                                 std::to_string(config_.blocked_after.count()) + " ms)");
    }
  }
}

}  // namespace keel::cluster
