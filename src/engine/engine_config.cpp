// EngineConfig::validate.
#include "engine/engine_config.h"

#include <algorithm>
#include <string>

#include "model/kv_storage.h"
#include "model/kv_type.h"

namespace keel::engine {

Status EngineConfig::validate() const {
  KEEL_TRY(scheduler.validate());
  if (block_size < 1 || block_size > 1024) {
    return Status::invalid_argument("--block-size must be in [1, 1024], got " +
                                    std::to_string(block_size));
  }
  if (kv_cache_bytes < 0) return Status::invalid_argument("--kv-cache-bytes must be ≥ 0");
  if (!model::is_kv_type(kv_dtype)) {
    return Status::invalid_argument("--kv-type must be f32, f16 or q8_0");
  }
  if (threads < 0) return Status::invalid_argument("--threads must be ≥ 0");
  if (kv_host_bytes < 0) return Status::invalid_argument("--kv-host-bytes must be ≥ 0");
  if (kv_disk_bytes < 0) return Status::invalid_argument("--kv-disk-bytes must be ≥ 0");
  if (kv_disk_dir.empty() != (kv_disk_bytes == 0)) {
    return Status::invalid_argument("--kv-disk-dir and --kv-disk-bytes go together");
  }
  if ((kv_host_bytes > 0 || !kv_disk_dir.empty()) && !enable_prefix_cache) {
    return Status::invalid_argument(
        "the KV tiers (--kv-host-bytes, --kv-disk-dir) need the "
        "prefix cache (drop --no-prefix-cache)");
  }
  sparse::SparseConfig sc = sparse_tuning;
  sc.page_size = block_size;
  sc.budget = sparse.budget;
  if (sparse.budget < block_size) {
    return Status::invalid_argument("--sparse-budget must be at least one KV block (" +
                                    std::to_string(block_size) + " tokens), got " +
                                    std::to_string(sparse.budget));
  }
  if (Result<std::unique_ptr<sparse::SparsePolicy>> p = sparse::make_policy(sparse.policy, sc);
      !p.ok()) {
    return p.error();
  }
  if (Status st = early_exit.validate(); !st.ok()) {
    return Status::invalid_argument("--early-exit: " + st.message());
  }
  if (Status st = speculative.validate(); !st.ok()) {
    return Status::invalid_argument("--spec-k / --speculative: " + st.message());
  }
  return {};
}

Result<int32_t> kv_pool_blocks(const EngineConfig& config, int64_t max_len,
                               const model::KvLayout& layout) {
  int64_t bytes = config.kv_cache_bytes;
  if (bytes == 0) {
    const int64_t blocks_per_seq = (max_len + config.block_size - 1) / config.block_size;
    bytes = std::min<int64_t>(EngineConfig::kDefaultKvCacheCapBytes,
                              blocks_per_seq * config.scheduler.max_num_seqs *
                                  static_cast<int64_t>(layout.block_bytes()));
  }
  const int32_t num_blocks = model::KvStorage::blocks_for_bytes(layout, static_cast<size_t>(bytes));
  if (num_blocks < 2) {
    return Status::invalid_argument("--kv-cache-bytes " + std::to_string(bytes) +
                                    " holds fewer than 2 KV blocks of " +
                                    std::to_string(layout.block_bytes()) + " bytes");
  }
  return num_blocks;
}

}  // namespace keel::engine
