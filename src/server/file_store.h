// FileStore: the files of /v1/files, kept in memory — uploaded batch inputs (purpose "batch") and
// the outputs batches write ("batch_output", "batch_error"). A file is immutable once added; its
// bytes are shared (shared_ptr), so a batch reading its input keeps it alive after a delete.
//
// Bounds: an upload may hold at most max_file_bytes; all files together at most max_total_bytes,
// each charged its size plus kFileOverheadBytes (so empty files cannot grow the store unbounded).
// A file that does not fit is refused (413 for the per-file limit, 400 for a full store).
//
// Thread safety: every member may be called from any thread (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace keel::server {

struct StoredFile {
  std::string id;  // "file-<hex>"
  std::string purpose;
  std::string filename;
  int64_t created_at = 0;  // Unix seconds
  std::shared_ptr<const std::string> content;

  // OpenAI's File object: {id, object: "file", bytes, created_at, filename, purpose,
  // status: "processed", expires_at: null, status_details: null}.
  [[nodiscard]] nlohmann::json to_json() const;
};

inline constexpr size_t kFileOverheadBytes = 512;

class FileStore {
 public:
  FileStore(size_t max_file_bytes, size_t max_total_bytes)
      : max_file_bytes_(max_file_bytes), max_total_bytes_(max_total_bytes) {}

  // Adds a file. `upload` applies the per-file limit (outputs are bound by the total only).
  ApiResult<StoredFile> add(std::string id, std::string purpose, std::string filename,
                            std::string content, bool upload);
  [[nodiscard]] std::optional<StoredFile> find(std::string_view id) const;
  // False when unknown.
  bool remove(std::string_view id);

  struct Page {
    std::vector<StoredFile> files;
    bool has_more = false;
  };
  // Files of `purpose` ("" = all) in creation order (newest first unless `ascending`), starting
  // after file `after` ("" = from the start; unknown → an empty page), at most `limit`.
  [[nodiscard]] Page list(std::string_view purpose, size_t limit, std::string_view after,
                          bool ascending) const;
  [[nodiscard]] size_t used_bytes() const;

 private:
  const size_t max_file_bytes_;
  const size_t max_total_bytes_;
  mutable std::mutex mu_;
  uint64_t next_seq_ = 0;                             // mu_
  size_t used_bytes_ = 0;                             // mu_
  std::map<uint64_t, StoredFile> files_;              // mu_; by creation order
  std::unordered_map<std::string, uint64_t> seq_of_;  // mu_; id → key in files_
};

}  // namespace keel::server
