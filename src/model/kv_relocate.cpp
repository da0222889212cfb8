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
  std::vector<float> k(static_cast<size_t>(layout.kv_dim));
  // The stored K already carries RoPE's magnitude (YaRN's mscale): the delta only turns it.
  kernels::RopeParams turn = hp.rope;
  turn.mscale = 1.0f;
  for (const KvRowMove& m : moves) {
    if (m.src_block == m.dst_block && m.src_row == m.dst_row && m.delta == 0) continue;
    for (int64_t il = 0; il < layout.n_layer; ++il) {
      std::memmove(kv.v_row(m.dst_block, il, m.dst_row), kv.v_row(m.src_block, il, m.src_row),
                   layout.row_bytes());
      kv.read_row(kv.k_row(m.src_block, il, m.src_row), k.data());
      ops.rope(turn, &m.delta, 1, hp.n_head_kv, hp.head_dim, layout.kv_dim, k.data());
      kv.write_row(k.data(), kv.k_row(m.dst_block, il, m.dst_row));
    }
  }
}

}  // namespace keel::model
