// KV row relocation for position-independent caching (EPIC's link step): a chunk's K/V rows,
// computed alone at chunk-local positions, are copied into a sequence's blocks at the chunk's
// real positions. V is position-free and copied as is; K was rotated by RoPE for its local
// position p, and rotating it again by the position delta d gives exactly K at p + d
// (R(d)·R(p) = R(p + d) for every linear-in-position RoPE: plain, linear-scaled, llama3 factors,
// YaRN — whose magnitude scale, already in the stored K, the delta's turn leaves out).
//
// Thread safety: none (writes the storage); rows of one call may not overlap.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/kernels.h"
#include "model/hparams.h"
#include "model/kv_storage.h"

namespace keel::model {

struct KvRowMove {
  int32_t src_block = 0;  // block and row holding the chunk-local K/V
  int32_t src_row = 0;
  int32_t dst_block = 0;  // block and row of the real position
  int32_t dst_row = 0;
  int32_t delta = 0;  // real position − chunk-local position
};

// Copies every layer's K and V row of each move, K rotated by its delta. `hp` must be the
// model's (hparams() of a loaded Model: its rope carries the frequency factors). F16 storage
// rotates in f32 and rounds back to nearest-even; Q8_0 storage dequantizes the K row, rotates it
// in f32 and quantizes it again (fresh scales; V rows are copied byte for byte). A move whose
// source and destination are the same row with delta 0 is a no-op; sources must not be written by
// earlier moves of the call.
void move_kv_rows(const HParams& hp, KvStorage& kv, kernels::Ops& ops,
                  std::span<const KvRowMove> moves);

}  // namespace keel::model
