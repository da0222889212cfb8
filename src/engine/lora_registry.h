// LoraRegistry: the LoRA adapters an engine serves, by name — loaded at start (`--lora`) or at
// run time (POST /v1/load_lora_adapter), unloaded at run time. Adapters are handed out as
// shared_ptr: a request holds its adapter from submit to its last step, so unloading one that
// requests still use only removes the name (the adapter goes when the last of them finishes).
//
// The prefix-cache identity of an adapter's KV (model_identity.h's lora_prefix_key) is derived from
// the model's key and the adapter's content digest, so base and adapter blocks never alias, two
// names for the same file share blocks, and a name reloaded with other weights never finds the old
// blocks.
//
// Thread safety: every method may be called from any thread (one mutex; loading parses and
// validates the file outside it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "core/result.h"
#include "engine/types.h"
#include "kv/block_hash.h"
#include "model/lora_adapter.h"
#include "model/model.h"

namespace keel::engine {

class LoraRegistry {
 public:
  // `base` must outlive the registry and every adapter handed out.
  explicit LoraRegistry(const model::Model& base) : base_(base) {}

  // Loads `path` as `name`. InvalidArgument: an empty or over-long name, a name already loaded,
  // or a file that is not a valid adapter for the base model (the message is the loader's:
  // model/lora_adapter.h — a missing file included).
  Status load(const std::string& name, const std::string& path);
  // NotFound when no adapter has this name.
  Status unload(const std::string& name);
  // The adapter named `name`, or null.
  [[nodiscard]] std::shared_ptr<const model::LoraAdapter> find(const std::string& name) const;
  [[nodiscard]] std::vector<LoraInfo> list() const;  // in load order
  [[nodiscard]] size_t size() const;

 private:
  struct Entry {
    LoraInfo info;
    std::shared_ptr<const model::LoraAdapter> adapter;
  };
  const model::Model& base_;
  mutable Mutex mu_;
  std::vector<Entry> entries_ KEEL_GUARDED_BY(mu_);  // load order
};

}  // namespace keel::engine
