// write_entry / check_entry / map_entry (see store_entry.h).
#include "store/store_entry.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "engine/model_identity.h"
#include "gguf/writer.h"
#include "model/group_weights.h"

namespace keel::store {
namespace {

constexpr std::string_view kFormatKey = "keel.store.format";
constexpr std::string_view kKeyKey = "keel.store.key";

// Keys the entry sets itself (a source that is itself an entry keeps none of its own).
bool entry_owned_key(std::string_view key) {
  return key.starts_with("keel.store.") || key.starts_with("keel.layout.") ||
         key.starts_with("keel.source.") || key == "general.alignment";
}

Status check_metadata(const gguf::GgufFile& file, const StoreKey& key) {
  const auto format = file.get_int(kFormatKey);
  if (!format.ok() || *format != kEntryFormat) {
    return Status::corrupt(file.path() + ": not a model store entry of format " +
                           std::to_string(kEntryFormat));
  }
  const auto name = file.get_string(kKeyKey);
  if (!name.ok() || *name != entry_name(key)) {
    return Status::corrupt(file.path() + ": entry was made for '" +
                           (name.ok() ? *name : std::string("?")) + "', not for '" +
                           entry_name(key) + "'");
  }
  return {};
}

Result<gguf::GgufWriter> entry_writer(const model::Model& model, const StoreKey& key) {
  const gguf::GgufFile& src = model.file();
  if (!model.expert_shard().whole()) {  // its unkept tensor bytes were never read
    return Status::invalid_argument(src.path() +
                                    ": a model store entry needs the whole model, "
                                    "not an expert shard");
  }
  KEEL_ASSIGN_OR_RETURN(const kv::BlockHash identity, engine::model_identity(src));
  gguf::GgufWriter w;
  for (const gguf::KeyValue& kv : src.metadata()) {
    if (!entry_owned_key(kv.key)) w.set(kv.key, kv.value);
  }
  w.set("general.alignment", uint32_t{64});
  w.set(std::string(kFormatKey), kEntryFormat);
  w.set(std::string(kKeyKey), entry_name(key));
  w.set(std::string(engine::kSourceIdentityLoKey), identity.lo);
  w.set(std::string(engine::kSourceIdentityHiKey), identity.hi);
  w.set(std::string(model::kLayoutVersionKey), model::kGroupedLayoutVersion);
  w.set(std::string(model::kGroupedTensorsKey),
        gguf::make_array(gguf::ValueType::kString,
                         model::grouped_tensor_names(src, model.weights())));
  for (const gguf::TensorInfo& t : src.tensors()) {
    const std::span<const std::byte> bytes = src.tensor_data(t);
    KEEL_TRY(w.add_tensor(t.name, t.dtype, t.shape, [bytes](std::span<std::byte> out) {
      if (out.size() != bytes.size()) return Status::internal("tensor size changed");
      std::memcpy(out.data(), bytes.data(), out.size());
      return Status();
    }));
  }
  return w;
}

}  // namespace

Result<uint64_t> write_entry(const model::Model& model, const StoreKey& key,
                             const std::string& path, FileSystem& fs) {
  KEEL_ASSIGN_OR_RETURN(const gguf::GgufWriter w, entry_writer(model, key));
  const std::filesystem::path final_path(path);
  const std::string partial = (final_path.parent_path() / ("." + final_path.filename().string() +
                                                           ".partial." + std::to_string(getpid())))
                                  .string();
  KEEL_TRY(w.write(partial, &fs));
  if (::chmod(partial.c_str(), 0444) != 0) {
    (void)fs.remove(partial);
    return Status::io_error(partial + ": chmod 0444 failed: " + std::strerror(errno));
  }
  if (Status s = fs.rename(partial, path); !s.ok()) {
    (void)fs.remove(partial);
    return s;
  }
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, fs.open_readable(path));
  return f->size();
}

Result<uint64_t> write_sealed_entry(const model::Model& model, const StoreKey& key,
                                    const std::string& path, FileSystem& fs, SealedHolder& holder) {
  KEEL_ASSIGN_OR_RETURN(const gguf::GgufWriter w, entry_writer(model, key));
  KEEL_ASSIGN_OR_RETURN(const int fd, holder.create(entry_name(key)));
  const auto written = [&]() -> Status {
    KEEL_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f,
                          fs.open_writable(holder_fd_path(getpid(), fd)));
    KEEL_TRY(w.write_to(*f));
    return f->close();
  }();
  if (!written.ok()) {
    holder.drop(fd);
    return written;
  }
  struct stat st {};
  const uint64_t bytes = ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  KEEL_TRY(holder.seal_and_link(fd, path));
  return bytes;
}

Status check_entry(const std::string& path, const StoreKey& key) {
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile file,
                        gguf::GgufFile::open(path, {.mode = gguf::DataMode::kNone}));
  return check_metadata(file, key);
}

Result<std::unique_ptr<model::Model>> map_entry(const std::string& path, const StoreKey& key,
                                                const model::ModelOptions& options) {
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile file,
                        gguf::GgufFile::open(path, {.mode = gguf::DataMode::kMmap}));
  KEEL_TRY(check_metadata(file, key));
  model::ModelOptions mopts = options;
  mopts.group_weights = false;  // the bytes are grouped already (and mapped read-only)
  return model::Model::load(std::move(file), mopts);
}

}  // namespace keel::store
