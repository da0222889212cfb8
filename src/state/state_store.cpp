// StateStore (see state_store.h).
#include "state/state_store.h"

#include <fmt/format.h>

#include <random>

#include "core/log.h"
#include "state/entry_format.h"

namespace keel::state {
namespace {

constexpr std::string_view kRecordSuffix = ".rec";
constexpr std::string_view kBlobSuffix = ".blob";
constexpr std::string_view kLogSuffix = ".log";
constexpr std::string_view kDamagedDir = "damaged";
constexpr size_t kMaxNameChars = 128;

Status check_name(std::string_view kind, std::string_view name) {
  bool ok = !name.empty() && name.size() <= kMaxNameChars && name.front() != '.';
  for (char c : name) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == '-');
  }
  if (ok) return {};
  return Status::invalid_argument(
      fmt::format("state store: {} \"{}\" is not 1-{} characters of [A-Za-z0-9._-] (no leading "
                  "'.')",
                  kind, name.substr(0, kMaxNameChars), kMaxNameChars));
}

std::string parent_of(const std::string& path) { return path.substr(0, path.rfind('/')); }
std::string file_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }

Result<std::string> read_whole(FileSystem* fs, const std::string& path) {
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, fs->open_readable(path));
  std::string bytes(f->size(), '\0');
  if (!bytes.empty()) KEEL_TRY(f->read_at(0, bytes.size(), bytes.data()));
  return bytes;
}

std::string random_tag() {
  std::random_device rd;
  const uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return fmt::format(".tmp.{:016x}.", v);
}

}  // namespace

StateStore::StateStore(FileSystem* fs, std::string dir, std::unique_ptr<FileLock> lock)
    : fs_(fs), dir_(std::move(dir)), lock_(std::move(lock)), temp_tag_(random_tag()) {}

StateStore::~StateStore() = default;

Result<std::unique_ptr<StateStore>> StateStore::open(FileSystem* fs, std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty()) return Status::invalid_argument("state store: empty directory name");
  KEEL_TRY(fs->create_directories(dir));
  Result<std::unique_ptr<FileLock>> lock = fs->lock_file(dir + "/LOCK");
  if (!lock.ok()) {
    if (lock.status().code() == StatusCode::kFailedPrecondition) {
      return Status::failed_precondition(fmt::format(
          "state directory {} is in use by another process (it holds {}/LOCK)", dir, dir));
    }
    return lock.status();
  }
  return std::unique_ptr<StateStore>(new StateStore(fs, std::move(dir), std::move(*lock)));
}

Result<std::unique_ptr<StateStore>> StateStore::open_shared(FileSystem* fs, std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty()) return Status::invalid_argument("state store: empty directory name");
  KEEL_TRY(fs->create_directories(dir));
  return std::unique_ptr<StateStore>(new StateStore(fs, std::move(dir), nullptr));
}

Result<std::string> StateStore::collection_dir(std::string_view collection, bool create) {
  KEEL_TRY(check_name("collection", collection));
  std::string path = dir_ + "/" + std::string(collection);
  if (!create) return path;
  {
    MutexLock lock(mu_);
    if (collections_.contains(collection)) return path;
  }
  KEEL_TRY(fs_->create_directories(path));
  KEEL_TRY(fs_->sync_directory(dir_));
  MutexLock lock(mu_);
  collections_.emplace(collection);
  return path;
}

Result<std::string> StateStore::entry_path(std::string_view collection, std::string_view id,
                                           std::string_view suffix, bool create) {
  KEEL_TRY(check_name("id", id));
  KEEL_ASSIGN_OR_RETURN(std::string dir, collection_dir(collection, create));
  return fmt::format("{}/{}{}", dir, id, suffix);
}

Status StateStore::write_atomically(const std::string& path, std::string_view header,
                                    std::string_view body) {
  uint64_t n = 0;
  {
    MutexLock lock(mu_);
    n = next_temp_++;
  }
  const std::string tmp = path + temp_tag_ + std::to_string(n);
  const Status st = [&]() -> Status {
    KEEL_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> out, fs_->open_writable(tmp));
    KEEL_TRY(out->append(std::as_bytes(std::span(header.data(), header.size()))));
    KEEL_TRY(out->append(std::as_bytes(std::span(body.data(), body.size()))));
    KEEL_TRY(out->sync());
    KEEL_TRY(out->close());
    KEEL_TRY(fs_->rename(tmp, path));
    return fs_->sync_directory(parent_of(path));
  }();
  if (!st.ok()) (void)fs_->remove(tmp);
  return st;
}

Status StateStore::remove_file(const std::string& path) {
  const Status st = fs_->remove(path);
  if (st.code() == StatusCode::kNotFound) return {};
  KEEL_TRY(st);
  return fs_->sync_directory(parent_of(path));
}

std::string StateStore::damaged_path(const std::string& path) {
  uint64_t n = 0;
  {
    MutexLock lock(mu_);
    n = next_damaged_++;
  }
  // "<dir>/damaged/<collection>.<file>.<this store's nonce>.<n>"
  return fmt::format("{}/{}/{}.{}{}{}", dir_, kDamagedDir, file_of(parent_of(path)), file_of(path),
                     temp_tag_.substr(4), n);
}

void StateStore::set_aside(const std::string& path, const std::string& reason) {
  // decode_entry's reasons name the file already.
  const std::string prefix = path + ": ";
  DamagedEntry e{.path = path,
                 .moved_to = "",
                 .reason = reason.starts_with(prefix) ? reason.substr(prefix.size()) : reason};
  const std::string target = damaged_path(path);
  if (fs_->create_directories(parent_of(target)).ok() && fs_->rename(path, target).ok()) {
    e.moved_to = target;
    (void)fs_->sync_directory(parent_of(path));
  } else {
    (void)remove_file(path);
  }
  KEEL_LOG_WARN("state: {}: {}; {}", path, e.reason,
                e.moved_to.empty() ? std::string("removed") : "moved to " + e.moved_to);
  MutexLock lock(mu_);
  damaged_.push_back(std::move(e));
}

void StateStore::remove_stale_temps(const std::string& dir, const std::vector<std::string>& names) {
  if (shared()) return;  // another process may be writing it
  for (const std::string& name : names) {
    const size_t tmp = name.find(".tmp.");
    if (tmp == std::string::npos || name.find(temp_tag_) != std::string::npos) continue;
    KEEL_LOG_INFO("state: removing {}/{}, a write an earlier process did not finish", dir, name);
    (void)remove_file(dir + "/" + name);
  }
}

std::vector<DamagedEntry> StateStore::damaged() const {
  MutexLock lock(mu_);
  return damaged_;
}

// --- records ---

Status StateStore::put_record(std::string_view collection, std::string_view id,
                              const nlohmann::json& value) {
  KEEL_ASSIGN_OR_RETURN(std::string path, entry_path(collection, id, kRecordSuffix, true));
  const std::string text = value.dump();
  return write_atomically(path, encode_entry_header(text), text);
}

Result<std::vector<Record>> StateStore::load_records(std::string_view collection) {
  KEEL_ASSIGN_OR_RETURN(std::string dir, collection_dir(collection, false));
  Result<std::vector<std::string>> names = fs_->list_directory(dir);
  if (names.status().code() == StatusCode::kNotFound) return std::vector<Record>{};
  KEEL_TRY(names.status());
  remove_stale_temps(dir, *names);
  std::vector<Record> out;
  for (const std::string& name : *names) {
    if (!name.ends_with(kRecordSuffix) || name.find(".tmp.") != std::string::npos) continue;
    const std::string path = dir + "/" + name;
    Result<std::string> bytes = read_whole(fs_, path);
    if (!bytes.ok()) {
      if (bytes.status().code() == StatusCode::kNotFound) continue;  // removed meanwhile
      return bytes.status();
    }
    Result<nlohmann::json> value = decode_record(*bytes, path);
    if (!value.ok()) {
      set_aside(path, std::string(value.status().message()));
      continue;
    }
    out.push_back({name.substr(0, name.size() - kRecordSuffix.size()), std::move(*value)});
  }
  return out;
}

Result<nlohmann::json> StateStore::decode_record(std::string_view bytes, const std::string& path) {
  KEEL_ASSIGN_OR_RETURN(std::string_view payload, decode_entry(bytes, path));
  nlohmann::json value = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return Status::corrupt(path + ": not JSON");
  return value;
}

Result<nlohmann::json> StateStore::read_record(std::string_view collection, std::string_view id) {
  KEEL_ASSIGN_OR_RETURN(std::string path, entry_path(collection, id, kRecordSuffix, false));
  KEEL_ASSIGN_OR_RETURN(std::string bytes, read_whole(fs_, path));
  Result<nlohmann::json> value = decode_record(bytes, path);
  if (!value.ok()) set_aside(path, std::string(value.status().message()));
  return value;
}

bool StateStore::has_record(std::string_view collection, std::string_view id) {
  Result<std::string> path = entry_path(collection, id, kRecordSuffix, false);
  return path.ok() && fs_->exists(*path);
}

Status StateStore::remove_record(std::string_view collection, std::string_view id) {
  KEEL_ASSIGN_OR_RETURN(std::string path, entry_path(collection, id, kRecordSuffix, false));
  return remove_file(path);
}

// --- blobs ---

Status StateStore::put_blob(std::string_view collection, std::string_view id,
                            std::string_view bytes) {
  KEEL_ASSIGN_OR_RETURN(std::string path, entry_path(collection, id, kBlobSuffix, true));
  return write_atomically(path, encode_entry_header(bytes), bytes);
}

Result<std::string> StateStore::read_blob(std::string_view collection, std::string_view id) {
  KEEL_ASSIGN_OR_RETURN(std::string path, entry_path(collection, id, kBlobSuffix, false));
  KEEL_ASSIGN_OR_RETURN(std::string bytes, read_whole(fs_, path));
  Result<std::string_view> payload = decode_entry(bytes, path);
  if (!payload.ok()) {
    set_aside(path, std::string(payload.status().message()));
    return payload.status();
  }
  return std::string(*payload);
}

Result<std::vector<std::string>> StateStore::list_blobs(std::string_view collection) {
  KEEL_ASSIGN_OR_RETURN(std::string dir, collection_dir(collection, false));
  Result<std::vector<std::string>> names = fs_->list_directory(dir);
  if (names.status().code() == StatusCode::kNotFound) return std::vector<std::string>{};
  KEEL_TRY(names.status());
  remove_stale_temps(dir, *names);
  std::vector<std::string> ids;
  for (const std::string& name : *names) {
    if (name.ends_with(kBlobSuffix) && name.find(".tmp.") == std::string::npos) {
      ids.push_back(name.substr(0, name.size() - kBlobSuffix.size()));
    }
  }
  return ids;
}

Status StateStore::remove_blob(std::string_view collection, std::string_view id) {
  KEEL_ASSIGN_OR_RETURN(std::string path, entry_path(collection, id, kBlobSuffix, false));
  return remove_file(path);
}

// --- logs ---

Result<std::vector<std::string>> StateStore::read_and_repair_log(const std::string& path) {
  KEEL_ASSIGN_OR_RETURN(std::string bytes, read_whole(fs_, path));
  const FrameScan scan = scan_frames(bytes);
  std::vector<std::string> entries(scan.payloads.begin(), scan.payloads.end());
  if (scan.problem.empty()) return entries;
  // The original goes to damaged/ (a copy: the log must never be without its intact prefix),
  // then the intact prefix replaces it.
  const std::string target = damaged_path(path);
  DamagedEntry e{.path = path, .moved_to = target, .reason = scan.problem};
  if (!fs_->create_directories(parent_of(target)).ok() ||
      !write_atomically(target, "", bytes).ok()) {
    e.moved_to.clear();
  }
  KEEL_TRY(write_atomically(path, "", std::string_view(bytes).substr(0, scan.intact_bytes)));
  KEEL_LOG_WARN("state: {}: {}; kept its {} intact entries{}", path, scan.problem, entries.size(),
                e.moved_to.empty() ? std::string() : ", the original copied to " + e.moved_to);
  MutexLock lock(mu_);
  damaged_.push_back(std::move(e));
  return entries;
}

Status StateStore::append(std::string_view collection, std::string_view id,
                          std::string_view entry) {
  if (entry.size() > kMaxFramePayloadBytes) {
    return Status::invalid_argument(fmt::format("state store: a log entry of {} bytes exceeds {}",
                                                entry.size(), kMaxFramePayloadBytes));
  }
  KEEL_ASSIGN_OR_RETURN(std::string path, entry_path(collection, id, kLogSuffix, true));
  MutexLock lock(log_mu_);
  const bool existed = fs_->exists(path);
  if (existed && !checked_logs_.contains(path)) {
    KEEL_TRY(read_and_repair_log(path).status());
  }
  checked_logs_.insert(path);
  const Status st = [&]() -> Status {
    const std::string frame = encode_frame(entry);
    KEEL_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> out, fs_->open_appendable(path));
    KEEL_TRY(out->append(std::as_bytes(std::span(frame.data(), frame.size()))));
    KEEL_TRY(out->sync());
    KEEL_TRY(out->close());
    return existed ? Status() : fs_->sync_directory(parent_of(path));
  }();
  if (!st.ok()) checked_logs_.erase(path);  // it may end in part of a frame now
  return st;
}

Result<std::vector<std::string>> StateStore::read_log(std::string_view collection,
                                                      std::string_view id) {
  KEEL_ASSIGN_OR_RETURN(std::string path, entry_path(collection, id, kLogSuffix, false));
  MutexLock lock(log_mu_);
  if (!fs_->exists(path)) return std::vector<std::string>{};
  KEEL_ASSIGN_OR_RETURN(std::vector<std::string> entries, read_and_repair_log(path));
  checked_logs_.insert(path);
  return entries;
}

Status StateStore::remove_log(std::string_view collection, std::string_view id) {
  KEEL_ASSIGN_OR_RETURN(std::string path, entry_path(collection, id, kLogSuffix, false));
  MutexLock lock(log_mu_);
  checked_logs_.erase(path);
  return remove_file(path);
}

}  // namespace keel::state
