// A model store entry: one model's run-time image in one file of the store directory (a tmpfs such
// as /dev/shm, so its pages are shared memory). The file is a GGUF v3 whose tensor bytes are the
// engine's run-time layout — quantized matrices already regrouped (model/group_weights.h lists
// them under keel.layout.grouped_tensors) — with the source's metadata (hyper-parameters,
// tokenizer, chat template) and these keys:
//   keel.store.format   uint32  kEntryFormat
//   keel.store.key      string  entry_name(key): a reader checks it against the key it wants
//   keel.source.model_identity_lo/hi  the source GGUF's engine::model_identity (same KV keys)
// and general.alignment 64 (every tensor starts on a cache line). The GGUF's own index (tensor
// name → offset, type, shape) is the entry's index.
//
// Invariants: an entry appears under its final name only whole, and is never written again:
// either a file (written to a dot-prefixed temporary, made read-only (0444), then renamed) or a
// sealed memfd named by a link (write_sealed_entry: written, sealed, then linked). A reader maps it
// read-only (MAP_SHARED, PROT_READ): the model's matrices point into the mapping — no copy, no
// read of the source file.
//
// Thread safety: free functions; any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/file_system.h"
#include "core/result.h"
#include "model/model.h"
#include "store/sealed_holder.h"
#include "store/store_key.h"

namespace keel::store {

inline constexpr uint32_t kEntryFormat = 1;

// Writes `model` (loaded from its GGUF with group_weights on, so its file's bytes are the
// run-time layout) as the entry for `key` at `path`; returns the entry's size in bytes.
[[nodiscard]] Result<uint64_t> write_entry(const model::Model& model, const StoreKey& key,
                                           const std::string& path, FileSystem& fs);

// The same entry as a sealed memfd held by `holder` (sealed_holder.h), named at `path` by a link:
// no process can write it once it is linked. Returns its size in bytes.
[[nodiscard]] Result<uint64_t> write_sealed_entry(const model::Model& model, const StoreKey& key,
                                                  const std::string& path, FileSystem& fs,
                                                  SealedHolder& holder);

// Checks the entry at `path` without mapping its tensors: a whole GGUF (a truncated or partial
// file fails), of kEntryFormat, made for `key`. Corrupt with the reason otherwise.
[[nodiscard]] Status check_entry(const std::string& path, const StoreKey& key);

// Maps the entry at `path` (checked as above) and builds the model on the mapping.
[[nodiscard]] Result<std::unique_ptr<model::Model>> map_entry(const std::string& path,
                                                              const StoreKey& key,
                                                              const model::ModelOptions& options);

}  // namespace keel::store
