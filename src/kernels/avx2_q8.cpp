// AVX2 kernels for Q8_0 and Q4_0 weights against Q8_0 activations, and the Q8_0 activation
// quantizer. Compiled with AVX2/FMA/F16C flags; reached only through the AVX2 table.
//
// Tiles of 8 consecutive rows × up to 2 tokens. Per 32-element block and row, `maddubs` forms
// int16 pair sums (Q8_0: |w| × sign-transferred activations, which cannot saturate since
// |w| ≤ 128 and |a| ≤ 127; Q4_0: nibbles 0..15 × activations, corrected by −8·Σa), `madd` widens
// them to int32, a horizontal-add tree reduces the 8 rows to one vector of exact integer block
// dots, and one convert + FMA with d_w·d_a accumulates the 8 outputs of the token.
//
// Pure functions; thread-safe.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/isa_kernels.h"

namespace keel::kernels::avx2 {
namespace {

constexpr int kRows = 8;
constexpr int kMaxTokens = 2;

// Sums the 8 int32 lanes of each of v[0..7]; lane i of the result is row i's total.
inline __m256i reduce_rows(const __m256i* v) {
  const __m256i h01 = _mm256_hadd_epi32(v[0], v[1]);
  const __m256i h23 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i h45 = _mm256_hadd_epi32(v[4], v[5]);
  const __m256i h67 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i h0123 = _mm256_hadd_epi32(h01, h23);
  const __m256i h4567 = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20),
                          _mm256_permute2x128_si256(h0123, h4567, 0x31));
}

struct Q8_0Format {
  static constexpr int64_t kBytes = kQ8_0Bytes;
  static constexpr int kOffset = 0;
  static __m256i load(const std::byte* blk) {  // the signed quants
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
  }
  static __m256i prepare(__m256i w) { return _mm256_abs_epi8(w); }
  // int16 pair sums of w·a given the raw weights w and their prepared form.
  static __m256i pair_sums(__m256i w, __m256i prepared, __m256i a) {
    return _mm256_maddubs_epi16(prepared, _mm256_sign_epi8(a, w));
  }
};

struct Q4_0Format {
  static constexpr int64_t kBytes = kQ4_0Bytes;
  static constexpr int kOffset = 8;
  static __m256i load(const std::byte* blk) {  // [low nibbles | high nibbles], 0..15
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    const __m256i both =
        _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
  }
  static __m256i prepare(__m256i w) { return w; }
  static __m256i pair_sums(__m256i, __m256i prepared, __m256i a) {
    return _mm256_maddubs_epi16(prepared, a);
  }
};

// The fp16 scales of block b of the 8 rows, as floats (packed four per 64-bit integer register
// with scalar loads, which beats a gather and runs on the integer ALUs).
template <class F>
inline __m256 load_row_scales(const std::byte* const* rows, int64_t b) {
  uint64_t packed[2];
  for (int g = 0; g < 2; ++g) {
    uint64_t v = 0;
    for (int j = 0; j < 4; ++j) {
      uint16_t h;
      std::memcpy(&h, rows[4 * g + j] + b * F::kBytes, 2);
      v |= static_cast<uint64_t>(h) << (16 * j);
    }
    packed[g] = v;
  }
  return _mm256_cvtph_ps(
      _mm_set_epi64x(static_cast<int64_t>(packed[1]), static_cast<int64_t>(packed[0])));
}

// Streams the next tile's rows (contiguous in memory) into the cache, the b-th of nb slices per
// block step. Without it the 8 interleaved row streams defeat the hardware prefetchers and
// decode runs at about half the memory bandwidth.
inline void prefetch_next_tile(const std::byte* next, int64_t tile_bytes, int64_t b, int64_t nb) {
  const char* p = reinterpret_cast<const char*>(next);
  for (int64_t off = tile_bytes * b / nb; off < tile_bytes * (b + 1) / nb; off += 64) {
    _mm_prefetch(p + off, _MM_HINT_T0);
  }
}

template <class F, int kT>
void tile(const MatmulTask& task, const std::byte* const* rows, int64_t t0, float* y, int valid) {
  const int64_t cols = task.w.cols, nb = cols / kQK;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[kT];
  for (int t = 0; t < kT; ++t) acc[t] = _mm256_setzero_ps();
  // The first token group of a tile pulls in the next tile (rows are contiguous in memory).
  const std::byte* next = t0 == 0 ? rows[0] + kRows * task.w.row_bytes : nullptr;
  const int64_t tile_bytes = kRows * static_cast<int64_t>(task.w.row_bytes);
  for (int64_t b = 0; b < nb; ++b) {
    if (next != nullptr) prefetch_next_tile(next, tile_bytes, b, nb);
    __m256i w[kRows], wp[kRows];
    for (int i = 0; i < kRows; ++i) {
      w[i] = F::load(rows[i] + b * F::kBytes);
      wp[i] = F::prepare(w[i]);
    }
    const __m256 dw = load_row_scales<F>(rows, b);
    for (int t = 0; t < kT; ++t) {
      const int64_t ab = (t0 + t) * nb + b;
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(task.q8.qs + ab * kQK));
      __m256i p[kRows];
      for (int i = 0; i < kRows; ++i) p[i] = _mm256_madd_epi16(F::pair_sums(w[i], wp[i], a), ones);
      __m256i dot = reduce_rows(p);
      if (F::kOffset != 0)
        dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(task.q8.sum[ab] * F::kOffset));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot),
                               _mm256_mul_ps(dw, _mm256_set1_ps(task.q8.d[ab])), acc[t]);
    }
  }
  for (int t = 0; t < kT; ++t) {
    float* yt = y + (t0 + t) * task.w.rows;
    if (valid == kRows) {
      _mm256_storeu_ps(yt, acc[t]);
    } else {
      alignas(32) float tmp[kRows];
      _mm256_store_ps(tmp, acc[t]);
      for (int i = 0; i < valid; ++i) yt[i] = tmp[i];
    }
  }
}

template <class F>
void matmul_q8(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  const std::byte* rows[kRows];
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kRows) {
    const int valid = static_cast<int>(row_end - r0 < kRows ? row_end - r0 : kRows);
    for (int i = 0; i < kRows; ++i) {
      const int64_t r = r0 + (i < valid ? i : valid - 1);
      rows[i] = task.w.data + static_cast<size_t>(r) * task.w.row_bytes;
    }
    int64_t t = 0;
    for (; t + kMaxTokens <= task.n_tokens; t += kMaxTokens) {
      tile<F, kMaxTokens>(task, rows, t, task.y + r0, valid);
    }
    if (t < task.n_tokens) tile<F, 1>(task, rows, t, task.y + r0, valid);
  }
}

// roundf(): round half away from zero, computed exactly (trunc, then fix up the fraction).
inline __m256 round_half_away(__m256 v) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = _mm256_andnot_ps(sign, _mm256_sub_ps(v, t));
  const __m256 up = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 one = _mm256_or_ps(_mm256_and_ps(v, sign), _mm256_set1_ps(1.0f));
  return _mm256_add_ps(t, _mm256_and_ps(up, one));
}

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

}  // namespace

void matmul_q8_0(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  matmul_q8<Q8_0Format>(task, row_begin, row_end);
}

void matmul_q4_0(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  matmul_q8<Q4_0Format>(task, row_begin, row_end);
}

// Bit-identical to scalar::quantize_q8_0 (same scalar d / id, exact roundf emulation).
void quantize_q8_0(const float* x, int64_t n, int8_t* qs, float* d, int32_t* sum) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK, qs += kQK) {
    __m256 v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(x + 8 * i);
    const __m256 m01 = _mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1]));
    const __m256 m23 = _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3]));
    const float amax = hmax(_mm256_max_ps(m01, m23));
    const float db = amax / 127.0f;
    const float id = db != 0.0f ? 1.0f / db : 0.0f;
    d[b] = _cvtsh_ss(_cvtss_sh(db, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int i = 0; i < 4; ++i)
      q[i] = _mm256_cvtps_epi32(round_half_away(_mm256_mul_ps(v[i], vid)));
    sum[b] =
        hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    const __m256i p =
        _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    const __m256i ordered =
        _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), ordered);
  }
}

}  // namespace keel::kernels::avx2
