// Model and KV identity (see model_identity.h).
#include "engine/model_identity.h"

#include <string>

#include "kv/block_file.h"  // block_hash_hex

namespace keel::engine {
namespace {

kv::BlockHash hash_string(const std::string& s) {
  return kv::hash_bytes(std::as_bytes(std::span<const char>(s.data(), s.size())));
}

}  // namespace

Result<kv::BlockHash> model_identity_of_file(const std::string& path) {
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile file,
                        gguf::GgufFile::open(path, {.mode = gguf::DataMode::kNone}));
  return model_identity(file);
}

Result<kv::BlockHash> model_identity(const gguf::GgufFile& file) {
  KEEL_ASSIGN_OR_RETURN(std::string arch, file.get_string("general.architecture"));
  const gguf::Value* lo = file.find(kSourceIdentityLoKey);
  const gguf::Value* hi = file.find(kSourceIdentityHiKey);
  if (lo != nullptr || hi != nullptr) {
    const auto* lo64 = lo ? std::get_if<uint64_t>(&lo->data) : nullptr;
    const auto* hi64 = hi ? std::get_if<uint64_t>(&hi->data) : nullptr;
    if (lo64 == nullptr || hi64 == nullptr) {
      return Status::invalid_argument(file.path() + ": " + std::string(kSourceIdentityLoKey) +
                                      " and " + std::string(kSourceIdentityHiKey) +
                                      " must both be uint64");
    }
    return kv::BlockHash{*lo64, *hi64};
  }
  std::string id = "keel-model-v1|" + arch;
  for (const gguf::TensorInfo& t : file.tensors()) {
    id += "|" + t.name + ":" + std::to_string(static_cast<int>(t.dtype)) + ":" +
          std::to_string(t.offset) + ":" + std::to_string(t.num_bytes);
  }
  id += "|" + std::to_string(file.file_size());
  return hash_string(id);
}

kv::BlockHash kv_tier_identity(const kv::BlockHash& model_key, DType kv_dtype, int32_t block_size) {
  return hash_string("keel-kv-tier-v1|" + kv::block_hash_hex(model_key) + "|" +
                     std::string(dtype_name(kv_dtype)) + "|" + std::to_string(block_size));
}

kv::BlockHash pic_chunk_root(const kv::BlockHash& model_key) {
  return hash_string("keel-pic-chunk-v1|" + kv::block_hash_hex(model_key));
}

kv::BlockHash lora_prefix_key(const kv::BlockHash& model_key,
                              const std::array<uint64_t, 2>& adapter_digest) {
  std::string bytes = "keel-lora-v1|";
  for (uint64_t w : {model_key.lo, model_key.hi, adapter_digest[0], adapter_digest[1]}) {
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((w >> (8 * i)) & 0xff));
  }
  return kv::hash_bytes(std::as_bytes(std::span<const char>(bytes.data(), bytes.size())));
}

std::vector<kv::BlockHash> prefix_block_hashes(const kv::BlockHash& model_key,
                                               std::string_view cache_salt,
                                               std::span<const int32_t> tokens,
                                               int32_t block_size) {
  std::vector<kv::BlockHash> out;
  if (block_size <= 0) return out;
  const kv::BlockHash extra = kv::request_extra_key(model_key, cache_salt);
  kv::BlockHash parent = kv::kRootHash;
  const auto bs = static_cast<size_t>(block_size);
  for (size_t start = 0; start + bs <= tokens.size(); start += bs) {
    parent = kv::hash_block(parent, tokens.subspan(start, bs), extra);
    out.push_back(parent);
  }
  return out;
}

}  // namespace keel::engine
