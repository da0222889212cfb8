// ModelStore (see model_store.h).
#include "store/model_store.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>

#include "core/log.h"
#include "model/model.h"
#include "store/eviction.h"
#include "store/store_entry.h"

namespace keel::store {
namespace {

void mark_used(const std::string& path) {
  (void)::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // now; best effort (another owner's)
}

}  // namespace

Status StoreConfig::validate() const {
  if (dir.empty()) return Status::invalid_argument("model store: the directory is empty");
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return Status::invalid_argument("model store: " + dir + " is not a directory");
  }
  return {};
}

Result<std::vector<EntryInfo>> ModelStore::entries() const {
  KEEL_ASSIGN_OR_RETURN(std::vector<std::string> names, fs_->list_directory(config_.dir));
  std::sort(names.begin(), names.end());
  std::vector<EntryInfo> out;
  for (const std::string& name : names) {
    std::optional<StoreKey> key = parse_entry_name(name);
    if (!key) continue;
    EntryInfo e;
    e.key = std::move(*key);
    e.path = path_of(e.key);
    struct stat st {};
    if (::stat(e.path.c_str(), &st) != 0) continue;  // removed meanwhile
    e.bytes = static_cast<uint64_t>(st.st_size);
    e.last_use_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
    out.push_back(std::move(e));
  }
  return out;
}

std::string ModelStore::path_of(const StoreKey& key) const {
  return (std::filesystem::path(config_.dir) / entry_name(key)).string();
}

Result<std::string> ModelStore::find(const StoreKey& key) const {
  const std::string path = path_of(key);
  if (!fs_->exists(path)) return Status::not_found("model store: no entry " + entry_name(key));
  KEEL_TRY(check_entry(path, key));
  mark_used(path);
  return path;
}

ModelSource ModelStore::choose_source(const std::string& gguf_path,
                                      const std::optional<StoreKey>& key,
                                      std::string_view isa) const {
  ModelSource out;
  out.path = gguf_path;
  Result<StoreKey> k = key ? Result<StoreKey>(*key) : key_for_file(*fs_, gguf_path, isa);
  if (!k.ok()) {
    out.store_error = k.status();
    return out;
  }
  if (k->isa != isa) {
    out.store_error =
        Status::invalid_argument("model store: entry " + entry_name(*k) + " is for ISA " + k->isa +
                                 ", this process runs " + std::string(isa));
    return out;
  }
  Result<std::string> found = find(*k);
  if (!found.ok()) {
    out.store_error = found.status();
    return out;
  }
  out.path = *found;
  out.from_store = true;
  return out;
}

Status ModelStore::remove(const StoreKey& key) {
  const std::string path = path_of(key);
  if (!fs_->exists(path)) return Status::not_found("model store: no entry " + entry_name(key));
  return remove_path(path);
}

Status ModelStore::remove_path(const std::string& path) {
  if (sealed_ != nullptr && sealed_->release(path)) return {};
  return fs_->remove(path);
}

void ModelStore::remove_dangling_links() {
  std::error_code ec;
  std::filesystem::directory_iterator it(config_.dir, ec);  // links too (list_directory: files)
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!parse_entry_name(name)) continue;
    const std::string path = it->path().string();
    struct stat link_st {};
    struct stat target_st {};
    if (::lstat(path.c_str(), &link_st) == 0 && S_ISLNK(link_st.st_mode) &&
        ::stat(path.c_str(), &target_st) != 0 && errno == ENOENT) {
      KEEL_LOG_INFO("model store: removing {}: its holder is gone", name);
      (void)fs_->remove(path);
    }
  }
}

Status ModelStore::make_room(uint64_t incoming, const StoreKey& keep, bool may_evict,
                             std::vector<std::string>* evicted) {
  remove_dangling_links();
  KEEL_ASSIGN_OR_RETURN(std::vector<EntryInfo> all, entries());
  std::vector<EntryUse> uses;
  for (const EntryInfo& e : all) {
    uses.push_back({entry_name(e.key), e.bytes, e.last_use_ns, e.key == keep});
  }
  const std::optional<std::vector<size_t>> victims =
      choose_evictions(uses, config_.budget_bytes, incoming);
  if (!victims) {
    return Status::resource_exhausted("model store: an entry of " + std::to_string(incoming) +
                                      " bytes does not fit in the budget of " +
                                      std::to_string(config_.budget_bytes) + " bytes");
  }
  if (!may_evict && !victims->empty()) {
    return Status::resource_exhausted(
        "model store: an entry of " + std::to_string(incoming) + " bytes fits the budget of " +
        std::to_string(config_.budget_bytes) + " bytes only by evicting " +
        uses[victims->front()].name + (victims->size() > 1 ? " and others" : ""));
  }
  for (size_t idx : *victims) {
    KEEL_TRY(remove_path(all[idx].path));
    KEEL_LOG_INFO("model store: evicted {} ({} bytes)", uses[idx].name, uses[idx].bytes);
    evicted->push_back(uses[idx].name);
  }
  return {};
}

Result<PreloadResult> ModelStore::preload(const std::string& gguf_path, std::string_view isa,
                                          bool may_evict) {
  const auto t0 = std::chrono::steady_clock::now();
  PreloadResult out;
  KEEL_ASSIGN_OR_RETURN(out.key, key_for_file(*fs_, gguf_path, isa));
  out.path = path_of(out.key);
  Result<std::string> found = find(out.key);
  if (found.ok()) {
    out.already_present = true;
  } else {
    if (found.status().code() != StatusCode::kNotFound) {
      KEEL_LOG_WARN("model store: replacing a bad entry: {}", found.status().message());
      KEEL_TRY(remove_path(out.path));
    }
    KEEL_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> src, fs_->open_readable(gguf_path));
    // An entry is the source's tensors re-aligned plus a few keys: its size, give or take pages.
    KEEL_TRY(make_room(src->size(), out.key, may_evict, &out.evicted));
    KEEL_ASSIGN_OR_RETURN(std::unique_ptr<model::Model> m,
                          model::Model::open(gguf_path, {.group_weights = true}));
    KEEL_ASSIGN_OR_RETURN(out.bytes, sealed_ != nullptr
                                         ? write_sealed_entry(*m, out.key, out.path, *fs_, *sealed_)
                                         : write_entry(*m, out.key, out.path, *fs_));
  }
  if (out.bytes == 0) {
    KEEL_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, fs_->open_readable(out.path));
    out.bytes = f->size();
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace keel::store
