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
  if (!(kv_pin_ttl_s >= 0 && kv_pin_ttl_s <= 86400)) {
    return Status::invalid_argument("--kv-pin-ttl must be in [0, 86400] seconds");
  }
  if (!(kv_pin_max_fraction >= 0 && kv_pin_max_fraction <= 1) ||
      !(kv_pin_tenant_max_fraction >= 0 && kv_pin_tenant_max_fraction <= 1)) {
    return Status::invalid_argument(
        "--kv-pin-max-fraction and --kv-pin-tenant-max-fraction must be in [0, 1]");
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

kv::KvPinLimits kv_pin_limits(const EngineConfig& config, int32_t num_blocks) {
  // A positive fraction caps at one block at least; 0 pins nothing (total) or sets no cap of the
  // tenant's own (per tenant).
  const auto blocks = [num_blocks](double fraction) {
    if (fraction <= 0) return 0;
    return std::max(1, static_cast<int32_t>(fraction * static_cast<double>(num_blocks)));
  };
  return kv::KvPinLimits{static_cast<int64_t>(config.kv_pin_ttl_s * 1e9),
                         blocks(config.kv_pin_max_fraction),
                         blocks(config.kv_pin_tenant_max_fraction)};
}

}  // namespace keel::engine
