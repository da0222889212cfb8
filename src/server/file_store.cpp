// FileStore (see file_store.h).
#include "server/file_store.h"

#include <fmt/format.h>

#include <ctime>

namespace keel::server {

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
  std::lock_guard<std::mutex> lock(mu_);
  if (used_bytes_ + charge > max_total_bytes_) {
    return ApiError::bad_request(
        fmt::format("The file store is full: {} of {} bytes used, this file needs {}; delete "
                    "files to make room.",
                    used_bytes_, max_total_bytes_, charge),
        std::nullopt, "file_store_full");
  }
  used_bytes_ += charge;
  const uint64_t seq = next_seq_++;
  seq_of_[file.id] = seq;
  files_.emplace(seq, file);
  return file;
}

std::optional<StoredFile> FileStore::find(std::string_view id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = seq_of_.find(std::string(id));
  if (it == seq_of_.end()) return std::nullopt;
  return files_.at(it->second);
}

bool FileStore::remove(std::string_view id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = seq_of_.find(std::string(id));
  if (it == seq_of_.end()) return false;
  auto file = files_.find(it->second);
  used_bytes_ -= file->second.content->size() + kFileOverheadBytes;
  files_.erase(file);
  seq_of_.erase(it);
  return true;
}

FileStore::Page FileStore::list(std::string_view purpose, size_t limit, std::string_view after,
                                bool ascending) const {
  std::lock_guard<std::mutex> lock(mu_);
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
  std::lock_guard<std::mutex> lock(mu_);
  return used_bytes_;
}

}  // namespace keel::server
