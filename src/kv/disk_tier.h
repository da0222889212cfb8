// DiskTier (T2): block payloads as files (block_file.h) under `<dir>/<identity hex>/`, LRU within
// a byte capacity (`--kv-disk-dir`, `--kv-disk-bytes`), persistent across restarts.
//
// A capacity below one block file is refused at open(). A failed write (e.g. the directory became
// unwritable) is counted in TierStats::write_errors and logged once per failure streak (again at
// most once a minute while it lasts; its end is logged too).
//
// Writes are atomic: a block is written to `<key>.kvb.<n>.kvb.tmp` and renamed to `<key>.kvb`.
// open() rebuilds the index from the directory: leftover temporary files are removed; a file whose
// header is damaged or truncated, whose identity, key or payload size differs from what its name
// and the store expect, or whose length is wrong is counted as corrupt and removed. Payload
// checksums are verified on every get(): a damaged payload is never served (Corrupt; the file is
// removed and counted), so the caller recomputes. Entries are ordered for eviction by access in
// this process and, across a restart, by their write sequence.
//
// Invariants: used_bytes = Σ file sizes of indexed entries and of writes in progress ≤ capacity.
// Thread safety: internal lock, never held during a file read or write (an eviction's unlink
// happens under it), so a slow disk does not stall contains() and the other calls; see TierStore.
// One put() at a time writes a given key's file; a get() whose file was replaced meanwhile (its
// entry has another write sequence) is a miss, not a damaged file.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/failure_streak.h"
#include "core/file_system.h"
#include "core/mutex.h"
#include "core/result.h"
#include "core/thread_annotations.h"
#include "kv/tier_store.h"

namespace keel::kv {

struct DiskTierConfig {
  std::string dir;             // root directory; this store uses <dir>/<identity hex>/
  int64_t capacity_bytes = 0;  // limit on the files' total size, headers included
  BlockHash identity;          // model, KV dtype and block size: other identities are never read
  size_t payload_bytes = 0;    // the size of every payload (> 0)
};

class DiskTier final : public TierStore {
 public:
  // Opens (creating directories as needed) and rebuilds the index; `fs` must outlive the store.
  // IoError when the directory cannot be created or listed.
  static Result<std::unique_ptr<DiskTier>> open(FileSystem* fs, const DiskTierConfig& config);

  [[nodiscard]] std::string_view name() const override { return "disk"; }
  Status put(const BlockHash& key, std::span<const std::byte> payload,
             std::vector<EvictedBlock>* evicted) override;
  Status get(const BlockHash& key, std::span<std::byte> out) override;
  [[nodiscard]] bool contains(const BlockHash& key) const override;
  void erase(const BlockHash& key) override;
  [[nodiscard]] TierStats stats() const override;
  Result<TierCost> measure_read() override;

  // The directory holding this store's files.
  [[nodiscard]] const std::string& directory() const { return store_dir_; }
  // The path of key's file (whether or not it exists).
  [[nodiscard]] std::string path_of(const BlockHash& key) const;

 private:
  DiskTier(FileSystem* fs, const DiskTierConfig& config, std::string store_dir);
  Status rebuild_index();
  // Validates one file found by rebuild_index() without the lock; adds it to `found` with its
  // sequence, or removes it and counts it in `*corrupt`.
  void index_file(const std::string& name, std::vector<std::pair<uint64_t, BlockHash>>* found,
                  int64_t* corrupt) const;
  void drop_locked(const BlockHash& key, bool count_eviction) KEEL_REQUIRES(mu_);
  // Counts a failed write; logs the first of a streak, then at most once a minute.
  void note_write_failure(const Status& st) KEEL_REQUIRES(mu_);
  // Reads and validates key's file into `out` (no lock needed: touches no member state).
  Status read_file(const BlockHash& key, std::span<std::byte> out) const;
  [[nodiscard]] int64_t file_bytes() const;

  FileSystem* fs_;
  DiskTierConfig config_;
  std::string store_dir_;
  mutable Mutex mu_;
  std::list<BlockHash> lru_ KEEL_GUARDED_BY(mu_);  // front: least recently used
  struct Entry {
    std::list<BlockHash>::iterator lru;  // the key's place on lru_
    uint64_t sequence = 0;               // the write sequence of its file: one per put
  };
  std::unordered_map<BlockHash, Entry, BlockHashHasher> entries_ KEEL_GUARDED_BY(mu_);
  // Keys whose put() is writing a file.
  std::unordered_set<BlockHash, BlockHashHasher> writing_ KEEL_GUARDED_BY(mu_);
  uint64_t next_sequence_ KEEL_GUARDED_BY(mu_) = 1;
  TierStats stats_ KEEL_GUARDED_BY(mu_);
  FailureStreak write_failures_ KEEL_GUARDED_BY(mu_){std::chrono::minutes(1)};
};

}  // namespace keel::kv
