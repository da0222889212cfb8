// LoraRegistry: names → shared adapters, and the adapter's prefix-cache key.
#include "engine/lora_registry.h"

#include <chrono>

namespace keel::engine {

Status LoraRegistry::load(const std::string& name, const std::string& path) {
  if (name.empty() || name.size() > 256) {
    return Status::invalid_argument("a LoRA adapter name must have 1 to 256 characters");
  }
  if (find(name) != nullptr) {
    return Status::invalid_argument("a LoRA adapter named '" + name + "' is already loaded");
  }
  Result<std::unique_ptr<model::LoraAdapter>> adapter = model::LoraAdapter::open(path, base_);
  if (!adapter.ok()) {
    return Status::invalid_argument("cannot load LoRA adapter '" + name +
                                    "': " + adapter.status().message());
  }
  Entry e;
  e.info.name = name;
  e.info.path = path;
  e.info.rank = (*adapter)->rank();
  e.info.targets = (*adapter)->targets_string();
  e.info.created_unix = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  e.adapter = std::move(*adapter);
  MutexLock lock(mu_);
  for (const Entry& x : entries_) {  // loaded meanwhile by another caller
    if (x.info.name == name) {
      return Status::invalid_argument("a LoRA adapter named '" + name + "' is already loaded");
    }
  }
  entries_.push_back(std::move(e));
  return Status();
}

Status LoraRegistry::unload(const std::string& name) {
  MutexLock lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->info.name == name) {
      entries_.erase(it);
      return Status();
    }
  }
  return Status::not_found("no LoRA adapter named '" + name + "' is loaded");
}

std::shared_ptr<const model::LoraAdapter> LoraRegistry::find(const std::string& name) const {
  MutexLock lock(mu_);
  for (const Entry& e : entries_) {
    if (e.info.name == name) return e.adapter;
  }
  return nullptr;
}

std::vector<LoraInfo> LoraRegistry::list() const {
  MutexLock lock(mu_);
  std::vector<LoraInfo> out;
  for (const Entry& e : entries_) out.push_back(e.info);
  return out;
}

size_t LoraRegistry::size() const {
  MutexLock lock(mu_);
  return entries_.size();
}

}  // namespace keel::engine
