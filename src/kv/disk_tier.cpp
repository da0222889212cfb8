// DiskTier: see disk_tier.h.
#include "kv/disk_tier.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/log.h"
#include "kv/block_file.h"

namespace keel::kv {
namespace {

constexpr std::string_view kSuffix = ".kvb";
constexpr std::string_view kTmpSuffix = ".kvb.tmp";

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Parses 32 hex digits (hi then lo) into a hash.
bool parse_hex(std::string_view s, BlockHash* out) {
  if (s.size() != 32) return false;
  uint64_t part[2] = {0, 0};
  for (size_t i = 0; i < 32; ++i) {
    const char c = s[i];
    const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0) return false;
    part[i / 16] = part[i / 16] << 4 | static_cast<uint64_t>(v);
  }
  *out = {part[1], part[0]};
  return true;
}

}  // namespace

Result<std::unique_ptr<DiskTier>> DiskTier::open(FileSystem* fs, const DiskTierConfig& config) {
  KEEL_CHECK(fs != nullptr && config.payload_bytes > 0 && config.capacity_bytes >= 0);
  const int64_t block_file = static_cast<int64_t>(kBlockFileHeaderBytes + config.payload_bytes);
  if (config.capacity_bytes < block_file) {
    return Status::invalid_argument("disk KV tier: a capacity of " +
                                    std::to_string(config.capacity_bytes) +
                                    " bytes (--kv-disk-bytes) cannot hold one KV block file of " +
                                    std::to_string(block_file) + " bytes");
  }
  std::string store_dir = config.dir + "/" + block_hash_hex(config.identity);
  KEEL_TRY(fs->create_directories(store_dir));
  std::unique_ptr<DiskTier> tier(new DiskTier(fs, config, std::move(store_dir)));
  KEEL_TRY(tier->rebuild_index());
  return tier;
}

DiskTier::DiskTier(FileSystem* fs, const DiskTierConfig& config, std::string store_dir)
    : fs_(fs), config_(config), store_dir_(std::move(store_dir)) {
  stats_.capacity_bytes = config.capacity_bytes;
}

std::string DiskTier::path_of(const BlockHash& key) const {
  return store_dir_ + "/" + block_hash_hex(key) + std::string(kSuffix);
}

int64_t DiskTier::file_bytes() const {
  return static_cast<int64_t>(kBlockFileHeaderBytes + config_.payload_bytes);
}

Status DiskTier::rebuild_index() {
  KEEL_ASSIGN_OR_RETURN(std::vector<std::string> names, fs_->list_directory(store_dir_));
  std::vector<std::pair<uint64_t, BlockHash>> found;  // (sequence, key)
  int64_t corrupt = 0;
  for (const std::string& name : names) {
    if (ends_with(name, kTmpSuffix)) {  // an interrupted write
      (void)fs_->remove(store_dir_ + "/" + name);
    } else if (ends_with(name, kSuffix)) {
      index_file(name, &found, &corrupt);
    }  // anything else is not ours: left alone
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  MutexLock lock(mu_);
  stats_.corrupt += corrupt;
  for (const auto& [sequence, key] : found) {
    entries_.emplace(key, Entry{lru_.insert(lru_.end(), key), sequence});
    stats_.used_bytes += file_bytes();
    next_sequence_ = std::max(next_sequence_, sequence + 1);
  }
  while (stats_.used_bytes > stats_.capacity_bytes) drop_locked(lru_.front(), true);
  return {};
}

void DiskTier::index_file(const std::string& name,
                          std::vector<std::pair<uint64_t, BlockHash>>* found,
                          int64_t* corrupt) const {
  const std::string path = store_dir_ + "/" + name;
  auto reject = [&] {
    ++*corrupt;
    (void)fs_->remove(path);
  };
  BlockHash named;
  if (!parse_hex(std::string_view(name).substr(0, name.size() - kSuffix.size()), &named)) {
    return reject();
  }
  Result<std::unique_ptr<RandomAccessFile>> file = fs_->open_readable(path);
  if (!file.ok()) return reject();
  if ((*file)->size() != static_cast<uint64_t>(file_bytes())) return reject();
  std::vector<std::byte> header(kBlockFileHeaderBytes);
  if (!(*file)->read_at(0, header.size(), header.data()).ok()) return reject();
  Result<BlockFileHeader> h = decode_block_file_header(header, path);
  if (!h.ok() || !(h->identity == config_.identity) || !(h->key == named) ||
      h->payload_bytes != config_.payload_bytes) {
    return reject();
  }
  found->emplace_back(h->sequence, named);
}

Status DiskTier::put(const BlockHash& key, std::span<const std::byte> payload,
                     std::vector<EvictedBlock>* /*evicted: the last tier drops its evictions*/) {
  if (payload.size() != config_.payload_bytes) {
    return Status::invalid_argument("disk KV tier: payload of " + std::to_string(payload.size()) +
                                    " bytes, expected " + std::to_string(config_.payload_bytes));
  }
  BlockFileHeader h;
  {  // reserve room (evicting) and a sequence number; the file is written without the lock
    MutexLock lock(mu_);
    if (auto it = entries_.find(key); it != entries_.end()) {
      lru_.splice(lru_.end(), lru_, it->second.lru);
      return {};
    }
    // Another put is writing this key: it stores the same block. (Two writers of one path would
    // let an eviction remove the file of the other's entry.)
    if (!writing_.insert(key).second) return {};
    if (file_bytes() > stats_.capacity_bytes) {
      writing_.erase(key);
      return Status::out_of_range("disk KV tier: a block file of " + std::to_string(file_bytes()) +
                                  " bytes exceeds the capacity of " +
                                  std::to_string(stats_.capacity_bytes) + " bytes");
    }
    while (stats_.used_bytes + file_bytes() > stats_.capacity_bytes && !lru_.empty()) {
      drop_locked(lru_.front(), true);
    }
    if (stats_.used_bytes + file_bytes() > stats_.capacity_bytes) {
      writing_.erase(key);
      return Status::resource_exhausted("disk KV tier: full of blocks being written");
    }
    stats_.used_bytes += file_bytes();  // reserved
    h.sequence = next_sequence_++;
  }
  h.identity = config_.identity;
  h.key = key;
  h.payload_bytes = payload.size();
  h.payload_checksum = block_payload_checksum(payload);
  const std::string path = path_of(key);
  const std::string tmp = path + "." + std::to_string(h.sequence) + std::string(kTmpSuffix);
  const Status st = [&]() -> Status {
    KEEL_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> out, fs_->open_writable(tmp));
    KEEL_TRY(out->append(encode_block_file_header(h)));
    KEEL_TRY(out->append(payload));
    KEEL_TRY(out->close());
    return fs_->rename(tmp, path);
  }();
  MutexLock lock(mu_);
  writing_.erase(key);
  if (!st.ok()) {
    note_write_failure(st);
    (void)fs_->remove(tmp);
    stats_.used_bytes -= file_bytes();
    return st;
  }
  if (const int64_t failed = write_failures_.succeed(); failed > 0) {
    KEEL_LOG_INFO("disk KV tier: writing to {} again after {} failed writes", store_dir_, failed);
  }
  entries_.emplace(key, Entry{lru_.insert(lru_.end(), key), h.sequence});
  stats_.bytes_in += static_cast<int64_t>(payload.size());
  return {};
}

Status DiskTier::read_file(const BlockHash& key, std::span<std::byte> out) const {
  const std::string path = path_of(key);
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, fs_->open_readable(path));
  if (file->size() != static_cast<uint64_t>(file_bytes())) {
    return Status::corrupt(path + ": KV block file has the wrong length");
  }
  std::vector<std::byte> header(kBlockFileHeaderBytes);
  KEEL_TRY(file->read_at(0, header.size(), header.data()));
  KEEL_ASSIGN_OR_RETURN(BlockFileHeader h, decode_block_file_header(header, path));
  if (!(h.identity == config_.identity) || !(h.key == key)) {
    return Status::corrupt(path + ": KV block file of another model or block");
  }
  KEEL_TRY(file->read_at(kBlockFileHeaderBytes, out.size(), out.data()));
  if (block_payload_checksum(out) != h.payload_checksum) {
    return Status::corrupt(path + ": KV block payload checksum mismatch");
  }
  return {};
}

Status DiskTier::get(const BlockHash& key, std::span<std::byte> out) {
  KEEL_CHECK(out.size() == config_.payload_bytes);
  uint64_t sequence = 0;  // the file this read is for
  {
    MutexLock lock(mu_);
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      ++stats_.misses;
      return Status::not_found("disk KV tier: block not held");
    }
    sequence = it->second.sequence;
  }
  const Status st = read_file(key, out);  // without the lock: other calls go on meanwhile
  MutexLock lock(mu_);
  auto it = entries_.find(key);
  // Evicted or erased during the read — or replaced by a new put of the key, whose file the
  // read may have missed while it was being renamed into place: a miss, not a damaged file.
  if (it == entries_.end() || (!st.ok() && it->second.sequence != sequence)) {
    ++stats_.misses;
    return Status::not_found("disk KV tier: block evicted during the read");
  }
  if (!st.ok()) {  // never served: dropped and counted
    ++stats_.corrupt;
    drop_locked(key, false);
    return Status::corrupt(st.message());
  }
  lru_.splice(lru_.end(), lru_, it->second.lru);
  ++stats_.hits;
  stats_.bytes_out += static_cast<int64_t>(out.size());
  return {};
}

bool DiskTier::contains(const BlockHash& key) const {
  MutexLock lock(mu_);
  return entries_.count(key) > 0;
}

void DiskTier::erase(const BlockHash& key) {
  MutexLock lock(mu_);
  if (entries_.count(key) > 0) drop_locked(key, false);
}

void DiskTier::note_write_failure(const Status& st) {
  ++stats_.write_errors;
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  if (write_failures_.fail(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count())) {
    KEEL_LOG_WARN(
        "disk KV tier: cannot write a block ({}); {} failed in a row, counted in "
        "keel:kv_tier_write_errors_total; logged again at most once a minute",
        st.message(), write_failures_.streak());
  }
}

void DiskTier::drop_locked(const BlockHash& key, bool count_eviction) {
  auto it = entries_.find(key);
  KEEL_CHECK(it != entries_.end());
  (void)fs_->remove(path_of(key));
  lru_.erase(it->second.lru);
  entries_.erase(it);
  stats_.used_bytes -= file_bytes();
  if (count_eviction) ++stats_.evictions;
}

Result<TierCost> DiskTier::measure_read() {
  const std::string probe = store_dir_ + "/probe" + std::string(kTmpSuffix);  // removed at open
  const size_t bytes = config_.payload_bytes + kBlockFileHeaderBytes;
  const size_t small = std::min<size_t>(4096, bytes / 2);
  {
    KEEL_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> out, fs_->open_writable(probe));
    KEEL_TRY(out->append(std::vector<std::byte>(bytes, std::byte{0x5a})));
    KEEL_TRY(out->close());
  }
  std::vector<std::byte> buf(bytes);
  auto time_read = [&](size_t n) -> Result<double> {
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      KEEL_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, fs_->open_readable(probe));
      KEEL_TRY(f->read_at(0, n, buf.data()));
      const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
      best = std::min(best, dt.count());
    }
    return best;
  };
  Result<double> t_small = time_read(small);
  Result<double> t_full = t_small.ok() ? time_read(bytes) : t_small;
  (void)fs_->remove(probe);
  if (!t_full.ok()) return t_full.status();
  TierCost c;
  c.latency_seconds = *t_small;
  c.seconds_per_byte = std::max(0.0, *t_full - *t_small) / static_cast<double>(bytes - small);
  return c;
}

TierStats DiskTier::stats() const {
  MutexLock lock(mu_);
  TierStats s = stats_;
  s.blocks = static_cast<int64_t>(entries_.size());
  return s;
}

}  // namespace keel::kv
