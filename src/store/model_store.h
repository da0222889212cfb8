// ModelStore: one host's store directory (a tmpfs, /dev/shm by default) of model entries
// (store_entry.h) under a memory budget. preload() builds an entry from a GGUF (read, regrouped,
// written whole, then renamed into place), evicting least recently used entries (eviction.h) to
// stay within the budget; find() hands a reader the checked path of an entry to map.
//
// Ownership and cleanup: the store only ever lists, evicts or removes files whose names parse as
// entry names (store_key.h) or its own dot-prefixed temporaries — never anything else in the
// directory. Entries outlive the process that made them (that is the point: a new TE maps them);
// `keel cluster up` removes on shutdown the entries it preloaded itself, `keel cluster preload
// --drop` removes one by hand, and entries left by a cluster that died are reclaimed by the budget
// (LRU) when room is needed. An evicted entry that is still mapped keeps its pages until the last
// mapping goes (tmpfs semantics): eviction frees memory only as readers let go.
//
// Last use is the entry file's modification time (set by preload and find).
//
// An entry is a read-only file, or — when the store is given a SealedHolder — a sealed memfd of
// the holding process named by a link (sealed_holder.h): readers cannot tell the difference, and
// such an entry goes away with its holder (its link then dangles: not an entry; make_room
// removes such links).
//
// Thread safety: none; one owner. Several processes may share a directory: entries appear
// atomically, and a racing preload of the same key writes the same bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/file_system.h"
#include "core/result.h"
#include "core/thread_pool.h"
#include "store/sealed_holder.h"
#include "store/store_key.h"

namespace keel::store {

struct StoreConfig {
  std::string dir = "/dev/shm";  // where entries live (a tmpfs for shared memory)
  uint64_t budget_bytes = 0;     // most bytes of entries held; 0 = no limit

  [[nodiscard]] Status validate() const;
};

struct EntryInfo {
  StoreKey key;
  std::string path;
  uint64_t bytes = 0;
  int64_t last_use_ns = 0;  // the file's mtime
};

struct PreloadResult {
  StoreKey key;
  std::string path;
  uint64_t bytes = 0;
  bool already_present = false;      // a valid entry existed: nothing was built
  std::vector<std::string> evicted;  // entry names removed to make room
  double seconds = 0.0;
};

// Where a process loads a model from: the store entry when a valid one exists, else the GGUF.
struct ModelSource {
  std::string path;         // the entry's path, or the GGUF's
  bool from_store = false;  // path is a store entry (map it: DataMode::kMmap)
  Status store_error;       // why the store was not used (NotFound: no entry), ok when it was
};

class ModelStore {
 public:
  // `sealed`: preload builds sealed memfd entries held there (sealed_holder.h; they live while
  // the holder does); nullptr: read-only files that outlive this process.
  ModelStore(StoreConfig config, FileSystem* fs, SealedHolder* sealed = nullptr)
      : config_(std::move(config)), fs_(fs), sealed_(sealed) {}

  [[nodiscard]] const StoreConfig& config() const { return config_; }
  // Every entry in the directory (names that parse as entry names), in name order.
  [[nodiscard]] Result<std::vector<EntryInfo>> entries() const;
  [[nodiscard]] std::string path_of(const StoreKey& key) const;
  // The path of `key`'s entry, checked (store_entry.h check_entry) and marked used: NotFound when
  // there is none, Corrupt (with the reason) when the file is not a whole entry for `key`.
  [[nodiscard]] Result<std::string> find(const StoreKey& key) const;
  // Builds the entry of the GGUF at `gguf_path` for `isa` unless a valid one exists; a corrupt one
  // is replaced. ResourceExhausted when it cannot fit in the budget — or, with `may_evict` false,
  // when it fits only by evicting another entry (a cluster starting next to busier models' entries
  // leaves the choice to its forecast).
  [[nodiscard]] Result<PreloadResult> preload(const std::string& gguf_path, std::string_view isa,
                                              bool may_evict = true);
  // The entry for `key` (when given: a binder that preloaded knows it, and the GGUF is not read)
  // or for the GGUF at `gguf_path` built for `isa`, checked; else the GGUF itself, with the reason
  // (a corrupt, partial or mismatched entry falls back to the file).
  [[nodiscard]] ModelSource choose_source(const std::string& gguf_path,
                                          const std::optional<StoreKey>& key,
                                          std::string_view isa) const;
  // Removes `key`'s entry (NotFound when absent); a sealed one this store's holder holds is also
  // let go.
  [[nodiscard]] Status remove(const StoreKey& key);

 private:
  Status make_room(uint64_t incoming, const StoreKey& keep, bool may_evict,
                   std::vector<std::string>* evicted);
  Status remove_path(const std::string& path);
  void remove_dangling_links();  // entry links whose holder is gone

  StoreConfig config_;
  FileSystem* fs_;        // not owned
  SealedHolder* sealed_;  // not owned; may be null
};

}  // namespace keel::store
