// FileStore (see file_store.h).
#include "server/file_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>

#include "core/log.h"

namespace keel::server {
namespace {

constexpr std::string_view kFilesCollection = "files";

// The state store's record of a file (its bytes are the blob of the same id).
nlohmann::json file_record(const StoredFile& f, uint64_t seq) {
  return {{"id", f.id},
          {"purpose", f.purpose},
          {"filename", f.filename},
          {"created_at", f.created_at},
          {"seq", seq}};
}

}  // namespace

nlohmann::json StoredFile::to_json() const {
  return {{"id", id},
          {"object", "file"},
          {"bytes", content ? content->size() : 0},
          {"created_at", created_at},
          {"filename", filename},
          {"purpose", purpose},
          {"status", "processed"},
          {"expires_at", nullptr},
          {"status_details", nullptr}};
}

ApiResult<StoredFile> FileStore::add(std::string id, std::string purpose, std::string filename,
                                     std::string content, bool upload) {
  if (upload && content.size() > max_file_bytes_) {
    ApiError e = ApiError::payload_too_large(max_file_bytes_);
    e.message = fmt::format("The file holds {} bytes; at most {} bytes are accepted per file.",
                            content.size(), max_file_bytes_);
    e.param = "file";
    return e;
  }
  const size_t charge = content.size() + kFileOverheadBytes;
  StoredFile file{.id = std::move(id),
                  .purpose = std::move(purpose),
                  .filename = std::move(filename),
                  .created_at = static_cast<int64_t>(std::time(nullptr)),
                  .content = std::make_shared<const std::string>(std::move(content))};
  uint64_t seq = 0;
  {
    MutexLock lock(mu_);
    if (used_bytes_ + charge > max_total_bytes_) {
      return ApiError::bad_request(
          fmt::format("The file store is full: {} of {} bytes used, this file needs {}; delete "
                      "files to make room.",
                      used_bytes_, max_total_bytes_, charge),
          std::nullopt, "file_store_full");
    }
    used_bytes_ += charge;  // reserved while the file is written
    seq = next_seq_++;
  }
  if (state_ != nullptr) {
    // The bytes first: a record on disk always has its bytes.
    Status st = state_->put_blob(kFilesCollection, file.id, *file.content);
    if (st.ok()) st = state_->put_record(kFilesCollection, file.id, file_record(file, seq));
    if (!st.ok()) {
      (void)state_->remove_blob(kFilesCollection, file.id);
      KEEL_LOG_WARN("files: {} not stored: {}", file.id, st.message());
      MutexLock lock(mu_);
      used_bytes_ -= charge;
      ApiError e = ApiError::internal(
          "The file could not be written to the server's state "
          "directory; see the server's log.");
      e.code = "file_store_write_failed";
      return e;
    }
  }
  MutexLock lock(mu_);
  seq_of_[file.id] = seq;
  files_.emplace(seq, file);
  return file;
}

Status FileStore::load(const state::Record& record) {
  StoredFile f;
  uint64_t seq = 0;
  try {
    f.id = record.value.at("id").get<std::string>();
    f.purpose = record.value.at("purpose").get<std::string>();
    f.filename = record.value.at("filename").get<std::string>();
    f.created_at = record.value.at("created_at").get<int64_t>();
    seq = record.value.at("seq").get<uint64_t>();
  } catch (const nlohmann::json::exception& e) {
    return Status::corrupt(fmt::format("its record is malformed: {}", e.what()));
  }
  if (f.id != record.id) return Status::corrupt(fmt::format("its record names {}", f.id));
  KEEL_ASSIGN_OR_RETURN(std::string bytes, state_->read_blob(kFilesCollection, record.id));
  f.content = std::make_shared<const std::string>(std::move(bytes));
  used_bytes_ += f.content->size() + kFileOverheadBytes;
  next_seq_ = std::max(next_seq_, seq + 1);
  seq_of_[f.id] = seq;
  files_.emplace(seq, std::move(f));
  return {};
}

Status FileStore::attach(state::StateStore* state) {
  state_ = state;
  KEEL_ASSIGN_OR_RETURN(std::vector<state::Record> records, state->load_records(kFilesCollection));
  KEEL_ASSIGN_OR_RETURN(std::vector<std::string> blobs, state->list_blobs(kFilesCollection));
  MutexLock lock(mu_);
  for (const state::Record& r : records) {
    const Status st = load(r);
    if (st.ok()) continue;
    KEEL_LOG_WARN("files: {} is left out: {}", r.id, st.message());
    // Its bytes are gone or damaged (set aside by the state store): the record is of no use.
    if (st.code() == StatusCode::kNotFound || st.code() == StatusCode::kCorrupt) {
      (void)state->remove_record(kFilesCollection, r.id);
    }
  }
  for (const std::string& id : blobs) {
    if (seq_of_.contains(id)) continue;
    // A deleted file whose bytes a batch still needed (pin()), or a file whose record was never
    // written (a crash in add()): kept until drop_unpinned_deleted().
    Result<std::string> bytes = state->read_blob(kFilesCollection, id);
    if (bytes.ok()) deleted_[id] = std::make_shared<const std::string>(std::move(*bytes));
  }
  KEEL_LOG_INFO("files: {} files ({} bytes) from {}", files_.size(), used_bytes_, state->dir());
  return {};
}

std::optional<StoredFile> FileStore::find(std::string_view id) const {
  MutexLock lock(mu_);
  auto it = seq_of_.find(std::string(id));
  if (it == seq_of_.end()) return std::nullopt;
  return files_.at(it->second);
}

bool FileStore::remove(std::string_view id) {
  const std::string key(id);
  bool pinned = false;
  {
    MutexLock lock(mu_);
    auto it = seq_of_.find(key);
    if (it == seq_of_.end()) return false;
    auto file = files_.find(it->second);
    used_bytes_ -= file->second.content->size() + kFileOverheadBytes;
    pinned = pins_.contains(key);
    if (pinned) deleted_[key] = file->second.content;
    files_.erase(file);
    seq_of_.erase(it);
  }
  forget_on_disk(key, pinned);
  return true;
}

void FileStore::forget_on_disk(const std::string& id, bool keep_bytes) {
  if (state_ == nullptr) return;
  Status st = state_->remove_record(kFilesCollection, id);
  if (st.ok() && !keep_bytes) st = state_->remove_blob(kFilesCollection, id);
  if (!st.ok())
    KEEL_LOG_WARN("files: {} not removed from the state directory: {}", id, st.message());
}

std::shared_ptr<const std::string> FileStore::pin(std::string_view id) {
  const std::string key(id);
  MutexLock lock(mu_);
  std::shared_ptr<const std::string> content;
  if (auto it = seq_of_.find(key); it != seq_of_.end()) {
    content = files_.at(it->second).content;
  } else if (auto d = deleted_.find(key); d != deleted_.end()) {
    content = d->second;
  }
  if (content) ++pins_[key];
  return content;
}

void FileStore::unpin(std::string_view id) {
  const std::string key(id);
  {
    MutexLock lock(mu_);
    auto it = pins_.find(key);
    if (it == pins_.end() || --it->second > 0) return;
    pins_.erase(it);
    if (deleted_.erase(key) == 0) return;
  }
  if (state_ == nullptr) return;
  if (Status st = state_->remove_blob(kFilesCollection, key); !st.ok()) {
    KEEL_LOG_WARN("files: the bytes of deleted file {} not removed: {}", key, st.message());
  }
}

void FileStore::drop_unpinned_deleted() {
  std::vector<std::string> dropped;
  {
    MutexLock lock(mu_);
    for (auto it = deleted_.begin(); it != deleted_.end();) {
      if (pins_.contains(it->first)) {
        ++it;
        continue;
      }
      dropped.push_back(it->first);
      it = deleted_.erase(it);
    }
  }
  for (const std::string& id : dropped) {
    if (state_ != nullptr) (void)state_->remove_blob(kFilesCollection, id);
  }
}

FileStore::Page FileStore::list(std::string_view purpose, size_t limit, std::string_view after,
                                bool ascending) const {
  MutexLock lock(mu_);
  Page page;
  bool started = after.empty();
  auto visit = [&](const StoredFile& f) {
    if (!started) {
      started = f.id == after;
      return true;
    }
    if (!purpose.empty() && f.purpose != purpose) return true;
    if (page.files.size() == limit) {
      page.has_more = true;
      return false;
    }
    page.files.push_back(f);
    return true;
  };
  if (ascending) {
    for (const auto& [seq, f] : files_) {
      if (!visit(f)) break;
    }
  } else {
    for (auto it = files_.rbegin(); it != files_.rend(); ++it) {
      if (!visit(it->second)) break;
    }
  }
  return page;
}

size_t FileStore::used_bytes() const {
  MutexLock lock(mu_);
  return used_bytes_;
}

}  // namespace keel::server
