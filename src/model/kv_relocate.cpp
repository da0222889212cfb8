// move_kv_rows (see kv_relocate.h).
#include "model/kv_relocate.h"

#include <cstring>
#include <vector>

#include "core/check.h"

namespace keel::model {

void move_kv_rows(const HParams& hp, KvStorage& kv, kernels::Ops& ops,
                  std::span<const KvRowMove> moves) {
  const KvLayout& layout = kv.layout();
  KEEL_CHECK(layout.kv_dim == hp.kv_dim() && layout.n_layer == hp.n_layer);
  const size_t row_bytes = layout.row_bytes();
  const bool f16 = layout.dtype == DType::kF16;
  std::vector<float> k(static_cast<size_t>(layout.kv_dim));
  for (const KvRowMove& m : moves) {
    if (m.src_block == m.dst_block && m.src_row == m.dst_row && m.delta == 0) continue;
    const std::byte* src = kv.block(m.src_block);
    std::byte* dst = kv.block(m.dst_block);
    const size_t src_row = static_cast<size_t>(m.src_row) * row_bytes;
    const size_t dst_row = static_cast<size_t>(m.dst_row) * row_bytes;
    for (int64_t il = 0; il < layout.n_layer; ++il) {
      const std::byte* ks = src + layout.k_offset(il) + src_row;
      std::byte* kd = dst + layout.k_offset(il) + dst_row;
      std::memmove(dst + layout.v_offset(il) + dst_row, src + layout.v_offset(il) + src_row,
                   row_bytes);
      if (f16) {
        kernels::dequantize_row(DType::kF16, ks, k.data(), layout.kv_dim);
      } else {
        std::memcpy(k.data(), ks, row_bytes);
      }
      ops.rope(hp.rope, &m.delta, 1, hp.n_head_kv, hp.head_dim, layout.kv_dim, k.data());
      if (f16) {
        kernels::quantize_row(DType::kF16, k.data(), kd, layout.kv_dim);
      } else {
        std::memcpy(kd, k.data(), row_bytes);
      }
    }
  }
}

}  // namespace keel::model
