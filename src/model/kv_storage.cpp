// KvLayout validation and KvStorage allocation (overflow-checked), block copies and the kernels'
// per-layer view.
#include "model/kv_storage.h"

#include "model/kv_type.h"

#include <cstring>
#include <limits>
#include <string>

namespace keel::model {

Status KvLayout::validate() const {
  if (n_layer < 1 || kv_dim < 1 || block_size < 1) {
    return Status::invalid_argument("KV layout dimensions must be positive: n_layer " +
                                    std::to_string(n_layer) + ", kv_dim " + std::to_string(kv_dim) +
                                    ", block_size " + std::to_string(block_size));
  }
  if (!is_kv_type(dtype)) {
    return Status::invalid_argument("KV type " + std::string(dtype_name(dtype)) +
                                    " is not supported (expected F32, F16 or Q8_0)");
  }
  if (dtype == DType::kQ8_0 && kv_dim % 32 != 0) {
    return Status::invalid_argument(
        "KV type Q8_0 stores rows in blocks of 32 values, but this model's KV row (n_kv_heads * "
        "head_dim) has " +
        std::to_string(kv_dim) + " values; use --kv-type f16 or f32");
  }
  // block_bytes = n_layer * 2 * block_size * (kv_dim / group * group_bytes); each factor is
  // positive.
  constexpr uint64_t kLimit = std::numeric_limits<int64_t>::max();
  const bool q8 = dtype == DType::kQ8_0;
  uint64_t bytes = (q8 ? 34 : dtype == DType::kF16 ? 2 : 4) * 2;
  for (const int64_t f : {n_layer, int64_t{block_size}, q8 ? kv_dim / 32 : kv_dim}) {
    if (bytes > kLimit / static_cast<uint64_t>(f)) {
      return Status::invalid_argument(
          "KV block size overflows: n_layer " + std::to_string(n_layer) + ", block_size " +
          std::to_string(block_size) + ", kv_dim " + std::to_string(kv_dim));
    }
    bytes *= static_cast<uint64_t>(f);
  }
  return Status();
}

KvLayout KvLayout::for_model(const HParams& hp, int32_t block_size, DType dtype) {
  KvLayout l;
  l.n_layer = hp.n_layer;
  l.kv_dim = hp.kv_dim();
  l.block_size = block_size;
  l.dtype = dtype;
  return l;
}

Result<KvStorage> KvStorage::create(const KvLayout& layout, int32_t num_blocks) {
  KEEL_TRY(layout.validate());
  if (num_blocks < 1) {
    return Status::invalid_argument("KV storage needs at least one block, got " +
                                    std::to_string(num_blocks));
  }
  const size_t block = layout.block_bytes();
  if (block > std::numeric_limits<size_t>::max() / static_cast<size_t>(num_blocks)) {
    return Status::resource_exhausted("KV storage size overflows: " + std::to_string(num_blocks) +
                                      " blocks of " + std::to_string(block) + " bytes");
  }
  const size_t bytes = block * static_cast<size_t>(num_blocks);
  auto buffer = AlignedBuffer::allocate(bytes);
  if (!buffer.ok()) {
    return Status::resource_exhausted("cannot allocate the KV storage (" + std::to_string(bytes) +
                                      " bytes for " + std::to_string(num_blocks) + " blocks of " +
                                      std::to_string(layout.block_size) +
                                      " positions): " + buffer.error().message());
  }
  KvStorage s;
  s.layout_ = layout;
  s.num_blocks_ = num_blocks;
  s.buffer_ = std::move(*buffer);
  return s;
}

int32_t KvStorage::blocks_for_bytes(const KvLayout& layout, size_t bytes) {
  if (!layout.validate().ok()) return 0;
  const size_t n = bytes / layout.block_bytes();
  return n > static_cast<size_t>(std::numeric_limits<int32_t>::max())
             ? std::numeric_limits<int32_t>::max()
             : static_cast<int32_t>(n);
}

void KvStorage::copy_block(int32_t src, int32_t dst) {
  KEEL_CHECK(src >= 0 && src < num_blocks_ && dst >= 0 && dst < num_blocks_);
  if (src == dst) return;
  std::memcpy(block(dst), block(src), layout_.block_bytes());
}

kernels::PagedKv KvStorage::paged(int64_t layer) const {
  KEEL_CHECK(layer >= 0 && layer < layout_.n_layer);
  kernels::PagedKv kv;
  kv.base = buffer_.data() + layout_.k_offset(layer);
  kv.block_stride = layout_.block_bytes();
  kv.v_offset = static_cast<size_t>(layout_.block_size) * layout_.row_bytes();
  kv.block_size = layout_.block_size;
  kv.kv_dim = layout_.kv_dim;
  kv.dtype = layout_.dtype;
  return kv;
}

}  // namespace keel::model
