// The loop structure shared by the x86 float matmul kernels (F32 / F16 / BF16 weights): decode
// walks the rows in tiles of 8 for one token; prefill walks them in L2-sized blocks and passes
// every group of kT tokens (whose activations stay in L1) over all tiles of a block before the
// next group, so weights are read from L2 rather than from memory once per token group.
// `Tiles` supplies the arithmetic: template <int kR, int kT> static void run(task, rows, valid,
// t0, y) computes kR rows × kT tokens. Each (row, token) value is computed by the same
// arithmetic whatever the tiling, so results do not depend on the blocking or the thread split.
//
// Internal linkage (anonymous namespace): included by files compiled with different ISA flags.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/dispatch.h"

namespace keel::kernels {
namespace {

// Calls fn(rows, valid, y) for each kR-row tile of [row_begin, row_end): rows[] points at the
// tile's rows (the last one repeated past the end), y at the output column of its first row.
template <int kR, class Fn>
void for_each_row_tile(const MatmulTask& task, int64_t row_begin, int64_t row_end, Fn&& fn) {
  const std::byte* rows[kR];
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kR) {
    const int valid = static_cast<int>(std::min<int64_t>(row_end - r0, kR));
    for (int i = 0; i < kR; ++i) {
      const int64_t r = r0 + std::min(i, valid - 1);
      rows[i] = task.w.data + static_cast<size_t>(r) * task.w.row_bytes;
    }
    fn(rows, valid, task.y + r0);
  }
}

// Weight bytes of one prefill row block.
constexpr int64_t kFloatBlockBytes = 256 << 10;

// Runs the kT-token tile when n == kT, else the smaller ones.
template <class Tiles, int kR, int kT>
void run_token_tail(const MatmulTask& task, const std::byte* const* rows, int valid, int64_t t0,
                    int64_t n, float* y) {
  if constexpr (kT > 0) {
    if (n == kT) return Tiles::template run<kR, kT>(task, rows, valid, t0, y);
    run_token_tail<Tiles, kR, kT - 1>(task, rows, valid, t0, n, y);
  }
}

template <class Tiles, int kPrefillRows, int kPrefillTokens>
void matmul_float_blocked(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  if (task.n_tokens == 1) {
    for_each_row_tile<8>(task, row_begin, row_end,
                         [&](const std::byte* const* rows, int valid, float* y) {
                           Tiles::template run<8, 1>(task, rows, valid, 0, y);
                         });
    return;
  }
  constexpr int kR = kPrefillRows, kT = kPrefillTokens;
  const int64_t row_bytes = static_cast<int64_t>(task.w.row_bytes);
  const int64_t block_rows = std::max<int64_t>(kR, kFloatBlockBytes / row_bytes / kR * kR);
  for (int64_t rb = row_begin; rb < row_end; rb += block_rows) {
    const int64_t re = std::min(row_end, rb + block_rows);
    int64_t t = 0;
    for (; t + kT <= task.n_tokens; t += kT) {
      for_each_row_tile<kR>(task, rb, re, [&](const std::byte* const* rows, int valid, float* y) {
        Tiles::template run<kR, kT>(task, rows, valid, t, y);
      });
    }
    if (t == task.n_tokens) continue;
    for_each_row_tile<kR>(task, rb, re, [&](const std::byte* const* rows, int valid, float* y) {
      run_token_tail<Tiles, kR, kT - 1>(task, rows, valid, t, task.n_tokens - t, y);
    });
  }
}

}  // namespace
}  // namespace keel::kernels
