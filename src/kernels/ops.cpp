// Ops: scalar baseline implementations of every op (the reference the SIMD tables must match).
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "kernels/kernels.h"

namespace keel::kernels {

struct Ops::Scratch {};

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

std::optional<Isa> isa_from_name(std::string_view name) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (isa_name(isa) == name) return isa;
  }
  return std::nullopt;
}

bool isa_supported(Isa isa, const CpuFeatures& cpu) {
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return cpu.avx2 && cpu.fma && cpu.f16c;
    case Isa::kAvx512:
      return isa_supported(Isa::kAvx2, cpu) && cpu.avx512f && cpu.avx512bw && cpu.avx512vl &&
             cpu.avx512dq && cpu.avx512vnni;
  }
  return false;
}

Isa best_isa(const CpuFeatures& cpu) {
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2}) {
    if (isa_supported(isa, cpu)) return isa;
  }
  return Isa::kScalar;
}

Ops::Ops(Isa isa, ThreadPool* pool)
    : isa_(isa), pool_(pool), table_(nullptr), scratch_(std::make_unique<Scratch>()) {
  KEEL_CHECK(pool_ != nullptr);
}

Ops::~Ops() = default;

void Ops::matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y) {
  KEEL_CHECK(matmul_supports(w.dtype));
  pool_->parallel_for(w.rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(w.cols));
    for (int64_t r = begin; r < end; ++r) {
      dequantize_row(w.dtype, w.data + static_cast<size_t>(r) * w.row_bytes, row.data(), w.cols);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const float* xt = x + t * w.cols;
        float sum = 0.0f;
        for (int64_t k = 0; k < w.cols; ++k) sum += row[static_cast<size_t>(k)] * xt[k];
        y[t * w.rows + r] = sum;
      }
    }
  });
}

void Ops::rms_norm(const float* x, const float* weight, int64_t n_rows, int64_t dim, float eps,
                   float* out) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    double ss = 0.0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float scale = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(dim)) + eps);
    for (int64_t i = 0; i < dim; ++i) o[i] = xr[i] * scale * weight[i];
  }
}

void Ops::rope(const RopeParams& p, const int32_t* positions, int64_t n_tokens, int64_t n_heads,
               int64_t head_dim, int64_t row_stride, float* x) {
  KEEL_CHECK(p.n_rot > 0 && p.n_rot % 2 == 0 && p.n_rot <= head_dim);
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  std::vector<float> cos_t(static_cast<size_t>(p.n_rot / 2)), sin_t(cos_t.size());
  for (int64_t t = 0; t < n_tokens; ++t) {
    float theta = static_cast<float>(positions[t]);
    for (int64_t i = 0; i < p.n_rot / 2; ++i) {
      const float ff = p.freq_factors ? p.freq_factors[i] : 1.0f;
      const float angle = p.freq_scale * (theta / ff);
      cos_t[static_cast<size_t>(i)] = std::cos(angle);
      sin_t[static_cast<size_t>(i)] = std::sin(angle);
      theta *= theta_scale;
    }
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + t * row_stride + h * head_dim;
      for (int64_t i = 0; i < p.n_rot / 2; ++i) {
        const int64_t a = p.neox ? i : 2 * i;
        const int64_t b = p.neox ? i + p.n_rot / 2 : 2 * i + 1;
        const float c = cos_t[static_cast<size_t>(i)], s = sin_t[static_cast<size_t>(i)];
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
      }
    }
  }
}

void Ops::silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void Ops::add(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void Ops::attention(const float* q, const float* k, const float* v, int64_t n_kv, int64_t kv_stride,
                    int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                    float* out) {
  KEEL_CHECK(n_kv > 0 && n_heads % n_kv_heads == 0);
  const int64_t group = n_heads / n_kv_heads;
  std::vector<float> scores(static_cast<size_t>(n_kv));
  for (int64_t h = 0; h < n_heads; ++h) {
    const float* qh = q + h * head_dim;
    const int64_t kvh = h / group;
    float max_s = -INFINITY;
    for (int64_t j = 0; j < n_kv; ++j) {
      const float* kj = k + j * kv_stride + kvh * head_dim;
      float s = 0.0f;
      for (int64_t d = 0; d < head_dim; ++d) s += qh[d] * kj[d];
      s *= scale;
      scores[static_cast<size_t>(j)] = s;
      max_s = std::max(max_s, s);
    }
    float sum = 0.0f;
    for (auto& s : scores) {
      s = std::exp(s - max_s);
      sum += s;
    }
    float* oh = out + h * head_dim;
    std::fill(oh, oh + head_dim, 0.0f);
    for (int64_t j = 0; j < n_kv; ++j) {
      const float p = scores[static_cast<size_t>(j)] / sum;
      const float* vj = v + j * kv_stride + kvh * head_dim;
      for (int64_t d = 0; d < head_dim; ++d) oh[d] += p * vj[d];
    }
  }
}

}  // namespace keel::kernels
