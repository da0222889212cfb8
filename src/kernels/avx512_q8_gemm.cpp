// Prefill GEMM for Q8_0 and Q4_0 weights against Q8_0 activations (AVX-512 + VNNI), used by the
// AVX-512 matmul when a call has at least kQ8GemmMinTokens tokens.
//
// Each 16-row tile of the weights is packed, one chunk of kChunkBlocks 32-element blocks at a
// time, into a column-interleaved buffer on the stack: for block b and quad j (elements 4j..4j+3)
// one 64-byte vector holds the 4 unsigned weight bytes of all 16 rows (Q8_0: w+128; Q4_0: the
// nibbles 0..15 as stored), with the 16 block scales as floats beside it. The micro-kernel then
// keeps 8 weight vectors in registers and, per token, runs 8 `vpdpbusd` with the token's 4
// activation bytes broadcast: the int32 lanes are the 16 rows' exact block dots, with no
// horizontal reduction. The unsigned offset is removed by starting the accumulator at
// −offset·Σa. kTokens tokens share each weight load.
//
// Weights in the row-group layout (weight_layout.h) pack the same way with one 64-byte load per
// quad vector instead of 16 gathered rows (gemm_grouped_*).
//
// Numerics: per token and row, the same exact integer block dots scaled by (d_w·d_a) and summed
// by FMA in block order as the row kernel in avx512_q8.cpp, so both give bit-identical results
// (a partial sum crosses a chunk boundary through y, unchanged). Pure functions; thread-safe.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/isa_kernels.h"
#include "kernels/weight_layout.h"

namespace keel::kernels::avx512 {
namespace {

constexpr int kRows = 16;
constexpr int kTokens = 12;           // tokens per register tile
constexpr int64_t kChunkBlocks = 64;  // blocks per packed chunk: 2048 columns, 36 KiB

struct alignas(64) PackedChunk {
  uint32_t q[kChunkBlocks][8][kRows];  // [block][quad][row]: 4 unsigned weight bytes
  float d[kChunkBlocks][kRows];        // block scales
};

struct Q8_0Pack {
  static constexpr int64_t kBytes = kQ8_0Bytes;
  static constexpr int kOffsetShift = 7;  // packed weights are w + 128
  static void pack_block(const std::byte* blk, int row, int64_t b, PackedChunk* p) {
    for (int j = 0; j < 8; ++j) {
      uint32_t v;
      std::memcpy(&v, blk + 2 + 4 * j, 4);
      p->q[b][j][row] = v ^ 0x80808080u;
    }
  }
  static void pack_grouped_block(const std::byte* quads, uint32_t (*q)[kRows]) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int j = 0; j < 8; ++j) {
      _mm512_store_si512(q[j], _mm512_xor_si512(_mm512_loadu_si512(quads + 64 * j), flip));
    }
  }
};

struct Q4_0Pack {
  static constexpr int64_t kBytes = kQ4_0Bytes;
  static constexpr int kOffsetShift = 3;  // stored nibbles are w + 8
  // Byte i holds element i (low nibble) and element i + 16 (high nibble).
  static void pack_block(const std::byte* blk, int row, int64_t b, PackedChunk* p) {
    for (int j = 0; j < 4; ++j) {
      uint32_t v;
      std::memcpy(&v, blk + 2 + 4 * j, 4);
      p->q[b][j][row] = v & 0x0f0f0f0fu;
      p->q[b][j + 4][row] = (v >> 4) & 0x0f0f0f0fu;
    }
  }
  static void pack_grouped_block(const std::byte* quads, uint32_t (*q)[kRows]) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    for (int j = 0; j < 4; ++j) {
      const __m512i v = _mm512_loadu_si512(quads + 64 * j);
      _mm512_store_si512(q[j], _mm512_and_si512(v, low4));
      _mm512_store_si512(q[j + 4], _mm512_and_si512(_mm512_srli_epi16(v, 4), low4));
    }
  }
};

template <class F>
[[gnu::always_inline]] inline void pack_chunk(const std::byte* const* rows, int64_t b0, int64_t nb,
                                              PackedChunk* p) {
  for (int r = 0; r < kRows; ++r) {
    const std::byte* blk = rows[r] + b0 * F::kBytes;
    for (int64_t b = 0; b < nb; ++b, blk += F::kBytes) {
      p->d[b][r] = _cvtsh_ss(load_u16(blk));
      F::pack_block(blk, r, b, p);
    }
  }
}

// The same chunk from one row group (weight_layout.h): per block 16 fp16 scales, then the quad
// vectors of the 16 rows.
template <class F>
[[gnu::always_inline]] inline void pack_grouped_chunk(const std::byte* group, int64_t b0,
                                                      int64_t nb, PackedChunk* p) {
  const std::byte* blk = group + b0 * kGroupRows * F::kBytes;
  for (int64_t b = 0; b < nb; ++b, blk += kGroupRows * F::kBytes) {
    _mm512_store_ps(p->d[b],
                    _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk))));
    F::pack_grouped_block(blk + 32, p->q[b]);
  }
}

// The activations of one register tile of tokens over one chunk, interleaved by block so that
// the micro-kernel addresses every token from one pointer.
struct alignas(64) PackedTokens {
  int8_t q[kChunkBlocks][kTokens][kQK];
  float d[kChunkBlocks][kTokens];
  int32_t corr[kChunkBlocks][kTokens];  // −offset · Σ a of the block
};

// Always inlined: GCC 12 at -O1 and above kept a value of gemm() in an AVX-512 mask register
// across an out-of-line call to this function (mask registers are call-clobbered), and the
// GEMM returned zeros once two gemm() instantiations shared it. Keep the GEMM loops call-free.
template <class F>
[[gnu::always_inline]] inline void pack_tokens(const MatmulTask& task, int64_t t0, int64_t b0,
                                               int64_t nb, PackedTokens* p) {
  const int64_t cols = task.w.cols, nb_total = cols / kQK;
  const int64_t n_valid = std::min<int64_t>(kTokens, task.n_tokens - t0);
  for (int t = 0; t < kTokens; ++t) {
    const int64_t tok = t0 + std::min<int64_t>(t, n_valid - 1);  // tail: repeat the last token
    const int8_t* qs = task.q8.qs + tok * cols + b0 * kQK;
    const float* d = task.q8.d + tok * nb_total + b0;
    const int32_t* sum = task.q8.sum + tok * nb_total + b0;
    for (int64_t b = 0; b < nb; ++b) {
      std::memcpy(p->q[b][t], qs + b * kQK, kQK);
      p->d[b][t] = d[b];
      p->corr[b][t] = -(sum[b] * (1 << F::kOffsetShift));
    }
  }
}

// acc[t] (16 rows of token t) += the chunk's contribution, block by block.
[[gnu::always_inline]] inline void run_chunk(const PackedChunk& w_tile, int64_t nb,
                                             const PackedTokens& a, __m512* acc) {
  for (int64_t b = 0; b < nb; ++b) {
    __m512i w[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) w[j] = _mm512_load_si512(w_tile.q[b][j]);
    const __m512 dw = _mm512_load_ps(w_tile.d[b]);
    const int8_t* ab = a.q[b][0];
#pragma GCC unroll 16
    for (int t = 0; t < kTokens; ++t) {
      __m512i dot = _mm512_set1_epi32(a.corr[b][t]);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        int32_t quad;
        std::memcpy(&quad, ab + t * kQK + 4 * j, 4);
        dot = _mm512_dpbusd_epi32(dot, w[j], _mm512_set1_epi32(quad));
      }
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                               _mm512_mul_ps(dw, _mm512_set1_ps(a.d[b][t])), acc[t]);
    }
  }
}

// Rows per outer block: its packed weight tiles stay in L2 while every token group passes.
constexpr int kTilesPerBlock = 4;

struct RowBlock {
  PackedChunk tile[kTilesPerBlock];
  __mmask16 mask[kTilesPerBlock];
  int64_t row0[kTilesPerBlock];
  int n_tiles = 0;
};

template <class F>
[[gnu::always_inline]] inline void pack_row_block(const MatmulTask& task, int64_t r0,
                                                  int64_t row_end, int64_t b0, int64_t nb,
                                                  RowBlock* rb) {
  rb->n_tiles = 0;
  for (int64_t tr = r0; tr < row_end && rb->n_tiles < kTilesPerBlock; tr += kRows) {
    const int64_t valid = std::min<int64_t>(row_end - tr, kRows);
    const std::byte* rows[kRows];
    for (int i = 0; i < kRows; ++i) {
      const int64_t r = tr + std::min<int64_t>(i, valid - 1);  // tail: repeat the last row
      rows[i] = task.w.data + static_cast<size_t>(r) * task.w.row_bytes;
    }
    const int i = rb->n_tiles++;
    pack_chunk<F>(rows, b0, nb, &rb->tile[i]);
    rb->mask[i] = static_cast<__mmask16>((1u << valid) - 1);
    rb->row0[i] = tr;
  }
}

// The same from whole row groups (weight_layout.h), as the callers guarantee.
template <class F>
[[gnu::always_inline]] inline void pack_grouped_row_block(const MatmulTask& task, int64_t r0,
                                                          int64_t row_end, int64_t b0, int64_t nb,
                                                          RowBlock* rb) {
  rb->n_tiles = 0;
  for (int64_t tr = r0; tr < row_end && rb->n_tiles < kTilesPerBlock; tr += kRows) {
    const int i = rb->n_tiles++;
    pack_grouped_chunk<F>(task.w.data + static_cast<size_t>(tr) * task.w.row_bytes, b0, nb,
                          &rb->tile[i]);
    rb->mask[i] = static_cast<__mmask16>(0xffff);
    rb->row0[i] = tr;
  }
}

// kGrouped: the weights are whole row groups (weight_layout.h).
template <class F, bool kGrouped>
void gemm(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  const int64_t nb_total = task.w.cols / kQK, n_tokens = task.n_tokens, y_stride = task.w.rows;
  RowBlock rb;
  PackedTokens tokens;
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kRows * kTilesPerBlock) {
    for (int64_t b0 = 0; b0 < nb_total; b0 += kChunkBlocks) {
      const int64_t nb = std::min(kChunkBlocks, nb_total - b0);
      if constexpr (kGrouped) {
        pack_grouped_row_block<F>(task, r0, row_end, b0, nb, &rb);
      } else {
        pack_row_block<F>(task, r0, row_end, b0, nb, &rb);
      }
      for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokens) {
        const int64_t n_valid = std::min<int64_t>(kTokens, n_tokens - t0);
        pack_tokens<F>(task, t0, b0, nb, &tokens);
        for (int i = 0; i < rb.n_tiles; ++i) {
          float* y = task.y + t0 * y_stride + rb.row0[i];
          __m512 acc[kTokens];
          for (int t = 0; t < kTokens; ++t) {
            acc[t] = b0 == 0 || t >= n_valid ? _mm512_setzero_ps()
                                             : _mm512_maskz_loadu_ps(rb.mask[i], y + t * y_stride);
          }
          run_chunk(rb.tile[i], nb, tokens, acc);
          for (int t = 0; t < n_valid; ++t)
            _mm512_mask_storeu_ps(y + t * y_stride, rb.mask[i], acc[t]);
        }
      }
    }
  }
}

}  // namespace

void gemm_q8_0(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  gemm<Q8_0Pack, false>(task, row_begin, row_end);
}

void gemm_q4_0(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  gemm<Q4_0Pack, false>(task, row_begin, row_end);
}

void gemm_grouped_q8_0(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  gemm<Q8_0Pack, true>(task, row_begin, row_end);
}

void gemm_grouped_q4_0(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  gemm<Q4_0Pack, true>(task, row_begin, row_end);
}

}  // namespace keel::kernels::avx512
