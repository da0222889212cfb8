// StateStore: a process's durable state in one directory (`--state-dir`), so what it holds
// survives a restart or a crash. Generic: named collections, each holding, by id,
//   records  small JSON documents (a batch, a file's description, later a fine-tuning job or a
//            stored response), replaced whole;
//   blobs    bytes (a file's contents, a batch's output), replaced whole;
//   logs     append-only sequences of entries (a batch's finished lines), each entry durable when
//            append() returns.
// Layout: <dir>/LOCK, <dir>/<collection>/<id>.rec | .blob | .log, <dir>/damaged/ (entries set
// aside). Formats: entry_format.h (every record, blob and log frame checksummed with XXH3-64).
//
// Durability: a record or blob is written to a temporary file in the same directory, fsynced,
// renamed over the old one and the directory fsynced — a crash leaves the old entry or the new
// one, never a mix; a removal is fsynced in the directory too. A log entry is one frame appended
// and fsynced; a frame cut short by a crash is dropped when the log is next read or appended to.
// Leftover temporary files of an earlier process are removed when their collection is loaded.
//
// Damage: an entry that fails its checksum, is truncated or (a record) is not JSON is never
// returned and never crashes the process: it is logged (warning: path and reason), moved to
// <dir>/damaged/ (named <collection>.<file>.<n>, kept for inspection) and listed by damaged().
// A log keeps its intact prefix; the original file goes to damaged/ as well.
//
// Locking: open() takes an exclusive flock on <dir>/LOCK, held until the store is destroyed (a
// killed process releases it): a second process — or a second open() — on the same directory
// gets FailedPrecondition.
//
// Sharing: open_shared() takes no lock, so several processes (the gateways of a cluster, on one
// host or over a shared file system) may use one directory at once. Records are still written
// whole by rename, so a reader sees the old record or the new one and two writers of one id end
// with one of the two; readers must expect an entry to appear or vanish between two calls.
// Temporary files are never removed there (another process may be writing one: a crashed
// writer's leftovers stay, and are never read); damaged entries are set aside as above.
//
// Ids and collection names: 1-128 characters of [A-Za-z0-9._-], not starting with '.'
// (InvalidArgument otherwise).
//
// Thread safety: every member may be called from any thread. Writes of different ids proceed in
// parallel; a record or blob written by two threads at once ends as one of the two; appends (all
// logs) are serialized.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/file_system.h"
#include "core/mutex.h"
#include "core/result.h"
#include "core/thread_annotations.h"

namespace keel::state {

struct Record {
  std::string id;
  nlohmann::json value;
};

// An entry found damaged and set aside.
struct DamagedEntry {
  std::string path;      // where it was
  std::string moved_to;  // where it is now ("" when it could not be moved: it was removed)
  std::string reason;
};

class StateStore {
 public:
  // Creates `dir` if needed and locks it; `fs` must outlive the store. FailedPrecondition naming
  // the directory when another holder has it locked; IoError when it cannot be created.
  static Result<std::unique_ptr<StateStore>> open(FileSystem* fs, std::string dir);
  // The same without the lock: a directory shared with other processes (above).
  static Result<std::unique_ptr<StateStore>> open_shared(FileSystem* fs, std::string dir);
  ~StateStore();
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  [[nodiscard]] const std::string& dir() const { return dir_; }
  [[nodiscard]] bool shared() const { return lock_ == nullptr; }

  // --- records ---
  Status put_record(std::string_view collection, std::string_view id, const nlohmann::json& value);
  // Every intact record of the collection (none when it does not exist), in no particular order.
  Result<std::vector<Record>> load_records(std::string_view collection);
  // One record: NotFound when absent; Corrupt naming the file and why when damaged (then set
  // aside: a later read finds none).
  Result<nlohmann::json> read_record(std::string_view collection, std::string_view id);
  // Whether the record's file exists (not verified).
  [[nodiscard]] bool has_record(std::string_view collection, std::string_view id);
  // Ok when absent.
  Status remove_record(std::string_view collection, std::string_view id);

  // --- blobs ---
  Status put_blob(std::string_view collection, std::string_view id, std::string_view bytes);
  // NotFound when absent; Corrupt when damaged (then set aside).
  Result<std::string> read_blob(std::string_view collection, std::string_view id);
  // The ids of the collection's blobs (not verified).
  Result<std::vector<std::string>> list_blobs(std::string_view collection);
  Status remove_blob(std::string_view collection, std::string_view id);

  // --- logs ---
  // Appends one entry (at most kMaxFramePayloadBytes), durable when this returns ok. A log that
  // existed before this process (or whose last append failed) is checked first.
  Status append(std::string_view collection, std::string_view id, std::string_view entry);
  // The log's entries in order (none when it does not exist); a damaged tail is set aside.
  Result<std::vector<std::string>> read_log(std::string_view collection, std::string_view id);
  Status remove_log(std::string_view collection, std::string_view id);

  // The entries set aside since open().
  [[nodiscard]] std::vector<DamagedEntry> damaged() const;

 private:
  StateStore(FileSystem* fs, std::string dir, std::unique_ptr<FileLock> lock);
  // A record's value from its file's bytes, or why not (Corrupt).
  static Result<nlohmann::json> decode_record(std::string_view bytes, const std::string& path);
  // <dir>/<collection>, created (and its creation made durable) on first use.
  Result<std::string> collection_dir(std::string_view collection, bool create);
  Result<std::string> entry_path(std::string_view collection, std::string_view id,
                                 std::string_view suffix, bool create);
  // Temp file + fsync + rename + fsync of the directory; the header (may be empty) then `body`.
  Status write_atomically(const std::string& path, std::string_view header, std::string_view body);
  Status remove_file(const std::string& path);
  // A new name under damaged/ for `path`.
  std::string damaged_path(const std::string& path);
  // Moves `path` to damaged/ (or removes it) and records it; `reason` is logged.
  void set_aside(const std::string& path, const std::string& reason);
  // The log's intact entries; a damaged tail is set aside and the intact prefix rewritten.
  Result<std::vector<std::string>> read_and_repair_log(const std::string& path)
      KEEL_REQUIRES(log_mu_);
  // Removes temporary files of earlier processes from a collection's directory.
  void remove_stale_temps(const std::string& dir, const std::vector<std::string>& names);

  FileSystem* const fs_;
  const std::string dir_;
  const std::unique_ptr<FileLock> lock_;  // null: opened shared
  const std::string temp_tag_;            // ".tmp.<this store's nonce>.": its own temporary files
  mutable Mutex mu_;
  // Directories known to exist.
  std::set<std::string, std::less<>> collections_ KEEL_GUARDED_BY(mu_);
  std::vector<DamagedEntry> damaged_ KEEL_GUARDED_BY(mu_);
  uint64_t next_temp_ KEEL_GUARDED_BY(mu_) = 0;
  uint64_t next_damaged_ KEEL_GUARDED_BY(mu_) = 0;
  // Serialises appends and log reads (the log files themselves), and guards checked_logs_.
  // Taken before mu_, never while holding it.
  Mutex log_mu_;
  std::set<std::string> checked_logs_ KEEL_GUARDED_BY(log_mu_);  // logs ending in a whole frame
};

}  // namespace keel::state
