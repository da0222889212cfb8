// FileStore: the files of /v1/files — uploaded batch inputs (purpose "batch") and the outputs
// batches write ("batch_output", "batch_error"). A file is immutable once added; its bytes are
// shared (shared_ptr), so a batch reading its input keeps it alive after a delete.
//
// Bounds: an upload may hold at most max_file_bytes; all files together at most max_total_bytes,
// each charged its size plus kFileOverheadBytes (so empty files cannot grow the store unbounded).
// A file that does not fit is refused (413 for the per-file limit, 400 for a full store).
//
// Durability (after attach(): `--state-dir`): every file is in the state store before add()
// returns — its bytes as a blob, then its description as a record of collection "files" — and a
// delete removes both, so the files survive a restart. A running batch pins its input (pin()):
// deleting a pinned file removes it from the API at once but keeps its bytes (in memory and on
// disk) until the batch unpins it, so a batch resumed after a restart can still read its input.
// Without attach() everything lives in memory only.
//
// Thread safety: every member may be called from any thread (one mutex, never held during disk
// I/O of add()); attach() before the store is shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/mutex.h"
#include "server/api_error.h"
#include "state/state_store.h"

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

  // Loads the files `state` holds (a file whose record or bytes are damaged is logged and left
  // out; bytes without a record — a deleted file a batch had pinned — are kept until
  // drop_unpinned_deleted()) and keeps every later change there. `state` must outlive the store.
  Status attach(state::StateStore* state);
  // Adds a file. `upload` applies the per-file limit (outputs are bound by the total only).
  // With a state store: 500 file_store_write_failed when the file could not be written there.
  ApiResult<StoredFile> add(std::string id, std::string purpose, std::string filename,
                            std::string content, bool upload);
  [[nodiscard]] std::optional<StoredFile> find(std::string_view id) const;
  // False when unknown.
  bool remove(std::string_view id);

  // The bytes of file `id` (nullptr when unknown), kept — even once the file is deleted — until
  // as many unpin() calls as pin() calls.
  std::shared_ptr<const std::string> pin(std::string_view id);
  void unpin(std::string_view id);
  // Forgets the bytes of deleted files that are not pinned (after a restart: once the batches
  // that still read theirs have pinned them).
  void drop_unpinned_deleted();

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
  // Removes file `id`'s record (and its bytes unless `keep_bytes`) from the state store.
  void forget_on_disk(const std::string& id, bool keep_bytes);
  Status load(const state::Record& record) KEEL_REQUIRES(mu_);  // attach(), one file

  const size_t max_file_bytes_;
  const size_t max_total_bytes_;
  state::StateStore* state_ = nullptr;  // set once by attach()
  mutable Mutex mu_;
  uint64_t next_seq_ KEEL_GUARDED_BY(mu_) = 0;
  size_t used_bytes_ KEEL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, StoredFile> files_ KEEL_GUARDED_BY(mu_);              // by creation order
  std::unordered_map<std::string, uint64_t> seq_of_ KEEL_GUARDED_BY(mu_);  // id → key in files_
  // id → pin() calls not yet unpinned
  std::unordered_map<std::string, int32_t> pins_ KEEL_GUARDED_BY(mu_);
  // Deleted files whose bytes are kept: pinned, or (after attach) not yet claimed.
  std::unordered_map<std::string, std::shared_ptr<const std::string>> deleted_ KEEL_GUARDED_BY(mu_);
};

}  // namespace keel::server
