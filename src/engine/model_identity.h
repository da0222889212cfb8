// Model and KV identity: the keys that say whose KV a block holds. The model identity is a hash of
// the GGUF's architecture, every tensor's name, type, offset and size, and the file size —
// computable from the metadata and tensor infos alone (a GgufFile opened with DataMode::kNone),
// so a router or gateway that never loads weights computes the same prefix-block keys as the
// engines serving that file (prefix_block_hashes). Derived keys: the disk tier's identity (model +
// KV dtype + block size: tier files of any other identity are never read), the root key of
// compiled PIC chunks, and the key of a LoRA adapter's KV.
//
// Stability: the encodings below are part of the on-disk tier format and of the cluster's cache
// events; changing one is a version bump ("keel-model-v1", "keel-kv-tier-v1", ...).
// Thread safety: pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "gguf/reader.h"
#include "kv/block_hash.h"

namespace keel::engine {

// A copy of a model in another layout (a model store entry, store/) records the identity of the
// GGUF it came from under these keys (two uint64), so engines that load either compute the same
// keys.
inline constexpr std::string_view kSourceIdentityLoKey = "keel.source.model_identity_lo";
inline constexpr std::string_view kSourceIdentityHiKey = "keel.source.model_identity_hi";

// The model's identity for prefix-cache keys: the recorded source identity when the file has
// one, else the hash above. Needs `general.architecture` (InvalidArgument when it is missing);
// reads no tensor bytes.
[[nodiscard]] Result<kv::BlockHash> model_identity(const gguf::GgufFile& file);
// The same from the GGUF at `path` (its metadata only).
[[nodiscard]] Result<kv::BlockHash> model_identity_of_file(const std::string& path);

// The identity of the KV bytes a tier stores: the model, the KV dtype and the block size.
[[nodiscard]] kv::BlockHash kv_tier_identity(const kv::BlockHash& model_key, DType kv_dtype,
                                             int32_t block_size);

// The root key under which PIC chunks are compiled (chained with the tenant's salt).
[[nodiscard]] kv::BlockHash pic_chunk_root(const kv::BlockHash& model_key);

// The key prefix blocks of requests run with a LoRA adapter are hashed under, in place of
// model_key: "keel-lora-v1" | model_key | the adapter's content digest
// (model::LoraAdapter::content_digest()), so base and adapter KV never alias.
[[nodiscard]] kv::BlockHash lora_prefix_key(const kv::BlockHash& model_key,
                                            const std::array<uint64_t, 2>& adapter_digest);

// The keys of the full blocks of `tokens` (a prompt) as an engine serving `model_key` with
// `block_size` publishes them for a request of salt `cache_salt`: block i's key chains block
// i-1's (kv::hash_block from kv::kRootHash under kv::request_extra_key). A trailing partial
// block has no key.
[[nodiscard]] std::vector<kv::BlockHash> prefix_block_hashes(const kv::BlockHash& model_key,
                                                             std::string_view cache_salt,
                                                             std::span<const int32_t> tokens,
                                                             int32_t block_size);

}  // namespace keel::engine
