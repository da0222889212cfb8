// Scalar reference for the K-quants: ggml's Q8_K activation quantizer and the Q4_K / Q5_K / Q6_K
// matmuls against it. Per super-block the weight·activation dot is computed exactly in integers
// (sub-block scales applied to integer dots, mins and Q6_K's −32 offset folded in through the
// activation block sums), then scaled by the f32 super-block scales — the numerics of llama.cpp's
// vec_dot_q*_K_q8_K.
//
// Pure functions over disjoint output rows; thread-safe.
#include <cstring>

#include "core/fp16.h"
#include "kernels/blocks.h"
#include "kernels/isa_kernels.h"

namespace keel::kernels::scalar {
namespace {

// ggml's nearest_int: round half to even through the 1.5·2^23 trick (|v| < 2^22).
int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

// The 256 unsigned quants of a Q4_K (qh == nullptr) or Q5_K super-block, in element order.
void decode_k4_k5(const uint8_t* qs, const uint8_t* qh, uint8_t* q) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      int lo = qs[32 * c + l] & 0x0f, hi = qs[32 * c + l] >> 4;
      if (qh != nullptr) {
        lo |= (qh[l] >> (2 * c) & 1) << 4;
        hi |= (qh[l] >> (2 * c + 1) & 1) << 4;
      }
      q[64 * c + l] = static_cast<uint8_t>(lo);
      q[64 * c + 32 + l] = static_cast<uint8_t>(hi);
    }
  }
}

// The 256 unsigned 6-bit quants of a Q6_K super-block (value = q − 32), in element order.
void decode_q6_k(const uint8_t* ql, const uint8_t* qh, uint8_t* q) {
  for (int h = 0; h < 2; ++h, ql += 64, qh += 32, q += 128) {
    for (int l = 0; l < 32; ++l) {
      q[l] = static_cast<uint8_t>((ql[l] & 0x0f) | (qh[l] & 3) << 4);
      q[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0x0f) | (qh[l] >> 2 & 3) << 4);
      q[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (qh[l] >> 4 & 3) << 4);
      q[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4);
    }
  }
}

// One super-block of Q4_K / Q5_K against Q8_K activations.
float dot_k4_k5_block(const std::byte* blk, bool q5, const int8_t* aq, float ad,
                      const int16_t* bsums) {
  uint8_t q[kQKK];
  decode_k4_k5(as_u8(blk + (q5 ? 48 : 16)), q5 ? as_u8(blk + 16) : nullptr, q);
  uint8_t sc[8], m[8];
  unpack_k_scales(as_u8(blk + 4), sc, m);
  int32_t sumi = 0, summ = 0;
  for (int s = 0; s < 8; ++s) {
    int32_t dot = 0;
    for (int l = 0; l < 32; ++l) dot += q[32 * s + l] * aq[32 * s + l];
    sumi += sc[s] * dot;
    summ += m[s] * (bsums[2 * s] + bsums[2 * s + 1]);
  }
  const float d = fp16_to_fp32(load_u16(blk)) * ad;
  const float dmin = fp16_to_fp32(load_u16(blk + 2)) * ad;
  return d * static_cast<float>(sumi) - dmin * static_cast<float>(summ);
}

float dot_q6_k_block(const std::byte* blk, const int8_t* aq, float ad, const int16_t* bsums) {
  uint8_t q[kQKK];
  decode_q6_k(as_u8(blk), as_u8(blk + 128), q);
  const int8_t* sc = as_i8(blk + 192);
  int32_t sumi = 0;
  for (int s = 0; s < 16; ++s) {
    int32_t dot = 0;
    for (int l = 0; l < 16; ++l) dot += q[16 * s + l] * aq[16 * s + l];
    sumi += sc[s] * (dot - 32 * bsums[s]);
  }
  return fp16_to_fp32(load_u16(blk + 208)) * ad * static_cast<float>(sumi);
}

template <int kType>  // 4, 5 or 6
void matmul_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  const int64_t nb = task.w.cols / kQKK;
  constexpr int64_t kBytes = kType == 4 ? kQ4_KBytes : kType == 5 ? kQ5_KBytes : kQ6_KBytes;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const std::byte* row = task.w.data + static_cast<size_t>(r) * task.w.row_bytes;
    for (int64_t t = 0; t < task.n_tokens; ++t) {
      const int8_t* aq = task.q8k.qs + t * task.w.cols;
      const float* ad = task.q8k.d + t * nb;
      const int16_t* bs = task.q8k.bsums + t * (task.w.cols / 16);
      float sum = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const std::byte* blk = row + b * kBytes;
        if constexpr (kType == 6) {
          sum += dot_q6_k_block(blk, aq + b * kQKK, ad[b], bs + b * 16);
        } else {
          sum += dot_k4_k5_block(blk, kType == 5, aq + b * kQKK, ad[b], bs + b * 16);
        }
      }
      task.y[t * task.w.rows + r] = sum;
    }
  }
}

}  // namespace

// ggml's quantize_row_q8_K_ref: max = the signed value of largest |x| (first on ties),
// q = min(127, nearest_int(-127/max · x)), d = 1 / (-127/max); an all-zero block gets d = 0.
void quantize_q8_k(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums) {
  for (int64_t b = 0; b < n / kQKK; ++b, x += kQKK, qs += kQKK, bsums += 16) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQKK; ++j) {
      const float ax = x[j] < 0 ? -x[j] : x[j];
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      d[b] = 0.0f;
      std::memset(qs, 0, kQKK);
      std::memset(bsums, 0, 16 * sizeof(int16_t));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQKK; ++j) {
      const int v = nearest_int(iscale * x[j]);
      qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += qs[16 * g + l];
      bsums[g] = static_cast<int16_t>(sum);
    }
    d[b] = 1.0f / iscale;
  }
}

void matmul_q4_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  matmul_k<4>(task, row_begin, row_end);
}
void matmul_q5_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  matmul_k<5>(task, row_begin, row_end);
}
void matmul_q6_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  matmul_k<6>(task, row_begin, row_end);
}

}  // namespace keel::kernels::scalar
