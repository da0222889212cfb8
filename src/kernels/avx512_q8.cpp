// AVX-512 + VNNI kernels for Q8_0 and Q4_0 weights against Q8_0 activations, and the Q8_0
// activation quantizer. Compiled with AVX-512 F/BW/VL/DQ/VNNI flags; reached only through the
// AVX-512 tables.
//
// Layout of the work: 16 consecutive weight rows × up to 4 tokens per tile. For each 32-element
// block the 16 rows are loaded two per zmm register and made unsigned (Q8_0: w+128 by XOR 0x80;
// Q4_0: the nibbles 0..15 as stored), `vpdpbusd` multiplies them with the signed activations,
// a shuffle tree reduces the 8 registers to one vector holding the 16 rows' exact integer block
// dots, the offset is removed with the activation block sum (−128·Σa or −8·Σa), and one
// convert + FMA with d_w·d_a accumulates into that token's 16 outputs. Each weight block is read
// once per group of 4 tokens; the outputs of a token are 16 contiguous floats.
//
// Pure functions; thread-safe.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/isa_kernels.h"

namespace keel::kernels::avx512 {
namespace {

constexpr int kRows = 16;
constexpr int kMaxTokens = 4;

// Register i holds rows lo_row(i) (low 256 bits) and lo_row(i) + 4 (high 256 bits).
constexpr int lo_row(int i) { return i < 4 ? i : i + 4; }

// Sums the 8 int32 lanes of each row in v[0..7] and returns the 16 row totals in row order.
// kImmA/kImmB pick which 128-bit chunks of a register belong to its low row and its high row:
// (0,1 | 2,3) when a row occupies a 256-bit half, (0,2 | 1,3) when its halves are interleaved.
template <int kImmA, int kImmB>
inline __m512i reduce_rows(const __m512i* v) {
  __m512i s[4];
  for (int p = 0; p < 4; ++p) {  // [a0 b0 a1 b1] per 128-bit chunk: pairwise lane sums
    s[p] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * p], v[2 * p + 1]),
                            _mm512_unpackhi_epi32(v[2 * p], v[2 * p + 1]));
  }
  // Per 128-bit chunk: the chunk totals of registers 0..3 (a) and 4..7 (b).
  const __m512i a =
      _mm512_add_epi32(_mm512_unpacklo_epi64(s[0], s[1]), _mm512_unpackhi_epi64(s[0], s[1]));
  const __m512i b =
      _mm512_add_epi32(_mm512_unpacklo_epi64(s[2], s[3]), _mm512_unpackhi_epi64(s[2], s[3]));
  return _mm512_add_epi32(_mm512_shuffle_i32x4(a, b, kImmA), _mm512_shuffle_i32x4(a, b, kImmB));
}

struct Q8_0Format {
  static constexpr int64_t kBytes = kQ8_0Bytes;
  static constexpr int kOffsetShift = 7;  // unsigned weights are w + 128
  // Rows lo and hi of one block: [lo qs | hi qs] as unsigned bytes.
  static __m512i load_pair(const std::byte* lo, const std::byte* hi) {
    const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo + 2));
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi + 2));
    return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(l), h, 1),
                            _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  // The 32 activations of a block in the lane order load_pair() uses: [x0..31 | x0..31].
  static __m512i load_acts(const int8_t* a) {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)));
  }
  static __m512i reduce(const __m512i* v) { return reduce_rows<0x88, 0xdd>(v); }
};

struct Q4_0Format {
  static constexpr int64_t kBytes = kQ4_0Bytes;
  static constexpr int kOffsetShift = 3;  // stored nibbles are w + 8
  // [lo low nibbles | hi low nibbles | lo high nibbles | hi high nibbles].
  static __m512i load_pair(const std::byte* lo, const std::byte* hi) {
    const __m128i l = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo + 2));
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi + 2));
    const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(l), h, 1);
    const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1);
    return _mm512_and_si512(both, _mm512_set1_epi8(0x0f));
  }
  // [x0..15 | x0..15 | x16..31 | x16..31].
  static __m512i load_acts(const int8_t* a) {
    const __m512i t =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)));
    return _mm512_shuffle_i64x2(t, t, 0x50);
  }
  static __m512i reduce(const __m512i* v) { return reduce_rows<0x44, 0xee>(v); }
};

// The fp16 scales of block b of the 16 rows, as floats. Packed four per 64-bit integer register
// with scalar loads: cheaper than a 16-lane gather, and it runs on the integer ALUs while the
// vector units work.
template <class F>
inline __m512 load_row_scales(const std::byte* const* rows, int64_t b) {
  uint64_t packed[4];
  for (int g = 0; g < 4; ++g) {
    uint64_t v = 0;
    for (int j = 0; j < 4; ++j) {
      uint16_t h;
      std::memcpy(&h, rows[4 * g + j] + b * F::kBytes, 2);
      v |= static_cast<uint64_t>(h) << (16 * j);
    }
    packed[g] = v;
  }
  return _mm512_cvtph_ps(
      _mm256_set_epi64x(static_cast<int64_t>(packed[3]), static_cast<int64_t>(packed[2]),
                        static_cast<int64_t>(packed[1]), static_cast<int64_t>(packed[0])));
}

// One tile: 16 rows (pointers, some repeated past the end) × kT tokens starting at t0.
// Streams the next tile's rows (contiguous in memory) into the cache, the b-th of nb slices per
// block step. Without it the 16 interleaved row streams defeat the hardware prefetchers and
// decode runs at about half the memory bandwidth.
inline void prefetch_next_tile(const std::byte* next, int64_t tile_bytes, int64_t b, int64_t nb) {
  const char* p = reinterpret_cast<const char*>(next);
  for (int64_t off = tile_bytes * b / nb; off < tile_bytes * (b + 1) / nb; off += 64) {
    _mm_prefetch(p + off, _MM_HINT_T0);
  }
}

template <class F, int kT>
void tile(const MatmulTask& task, const std::byte* const* rows, int64_t t0, float* y,
          __mmask16 store_mask) {
  const int64_t cols = task.w.cols, nb = cols / kQK;
  const int8_t* aq[kT];
  const float* ad[kT];
  const int32_t* as[kT];
  __m512 acc[kT];
  for (int t = 0; t < kT; ++t) {
    aq[t] = task.q8.qs + (t0 + t) * cols;
    ad[t] = task.q8.d + (t0 + t) * nb;
    as[t] = task.q8.sum + (t0 + t) * nb;
    acc[t] = _mm512_setzero_ps();
  }
  // The first token group of a tile pulls in the next tile (rows are contiguous in memory).
  const std::byte* next = t0 == 0 ? rows[0] + kRows * task.w.row_bytes : nullptr;
  const int64_t tile_bytes = kRows * static_cast<int64_t>(task.w.row_bytes);
  for (int64_t b = 0; b < nb; ++b) {
    if (next != nullptr) prefetch_next_tile(next, tile_bytes, b, nb);
    __m512i w[8];
    for (int i = 0; i < 8; ++i) {
      w[i] = F::load_pair(rows[lo_row(i)] + b * F::kBytes, rows[lo_row(i) + 4] + b * F::kBytes);
    }
    const __m512 dw = load_row_scales<F>(rows, b);
    for (int t = 0; t < kT; ++t) {
      const __m512i a = F::load_acts(aq[t] + b * kQK);
      __m512i p[8];
      for (int i = 0; i < 8; ++i) p[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[i], a);
      const __m512i dot =
          _mm512_sub_epi32(F::reduce(p), _mm512_set1_epi32(as[t][b] * (1 << F::kOffsetShift)));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, _mm512_set1_ps(ad[t][b])),
                               acc[t]);
    }
  }
  for (int t = 0; t < kT; ++t)
    _mm512_mask_storeu_ps(y + (t0 + t) * task.w.rows, store_mask, acc[t]);
}

template <class F>
void matmul_q8(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  const std::byte* rows[kRows];
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kRows) {
    const int64_t valid = row_end - r0 < kRows ? row_end - r0 : kRows;
    for (int i = 0; i < kRows; ++i) {
      const int64_t r = r0 + (i < valid ? i : valid - 1);
      rows[i] = task.w.data + static_cast<size_t>(r) * task.w.row_bytes;
    }
    const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
    float* y = task.y + r0;
    int64_t t = 0;
    for (; t + kMaxTokens <= task.n_tokens; t += kMaxTokens)
      tile<F, kMaxTokens>(task, rows, t, y, mask);
    switch (task.n_tokens - t) {
      case 3:
        tile<F, 3>(task, rows, t, y, mask);
        break;
      case 2:
        tile<F, 2>(task, rows, t, y, mask);
        break;
      case 1:
        tile<F, 1>(task, rows, t, y, mask);
        break;
      default:
        break;
    }
  }
}

// roundf(): round half away from zero, computed exactly (trunc, then fix up the fraction).
inline __m512 round_half_away(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 frac = _mm512_abs_ps(_mm512_sub_ps(v, t));
  const __mmask16 up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 one = _mm512_or_ps(_mm512_and_ps(v, _mm512_set1_ps(-0.0f)), _mm512_set1_ps(1.0f));
  return _mm512_mask_add_ps(t, up, t, one);
}

}  // namespace

void matmul_q8_0(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  if (task.n_tokens >= kQ8GemmMinTokens) return gemm_q8_0(task, row_begin, row_end);
  matmul_q8<Q8_0Format>(task, row_begin, row_end);
}

void matmul_q4_0(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  if (task.n_tokens >= kQ8GemmMinTokens) return gemm_q4_0(task, row_begin, row_end);
  matmul_q8<Q4_0Format>(task, row_begin, row_end);
}

// Bit-identical to scalar::quantize_q8_0 (same scalar d / id, exact roundf emulation).
void quantize_q8_0(const float* x, int64_t n, int8_t* qs, float* d, int32_t* sum) {
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK, qs += kQK) {
    const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
    const float db = amax / 127.0f;
    const float id = db != 0.0f ? 1.0f / db : 0.0f;
    d[b] = _cvtsh_ss(_cvtss_sh(db, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m512 vid = _mm512_set1_ps(id);
    const __m512i q0 = _mm512_cvtps_epi32(round_half_away(_mm512_mul_ps(x0, vid)));
    const __m512i q1 = _mm512_cvtps_epi32(round_half_away(_mm512_mul_ps(x1, vid)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), _mm512_cvtsepi32_epi8(q1));
    sum[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  }
}

}  // namespace keel::kernels::avx512
