// Dense loops of the trainer (dense_ops.h): matmuls, weight-gradient sums, RMSNorm and RoPE.
#include "train/dense_ops.h"

#include <cmath>

#include "core/index_cast.h"
#include "kernels/rope.h"
#include "kernels/weight_layout.h"

namespace keel::train {
namespace {

// Σ a[i]·b[i] in four interleaved partial sums (a fixed order, so fixed results).
template <typename T>
T dot(const T* a, const T* b, int64_t n) {
  T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

constexpr int64_t kRowGrain = 8;

}  // namespace

template <typename T>
DenseMatrix<T> dequantize(const kernels::Matrix& m) {
  DenseMatrix<T> out{m.rows, m.cols, std::vector<T>(sz(m.rows * m.cols))};
  std::vector<float> row(sz(m.cols));
  for (int64_t r = 0; r < m.rows; ++r) {
    kernels::dequantize_matrix_row(m, r, row.data());
    for (int64_t c = 0; c < m.cols; ++c) out.data[sz(r * m.cols + c)] = static_cast<T>(row[sz(c)]);
  }
  return out;
}

template <typename T>
DenseMatrix<T> transpose(const DenseMatrix<T>& m) {
  DenseMatrix<T> out{m.cols, m.rows, std::vector<T>(m.data.size())};
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.cols; ++c) out.data[sz(c * m.rows + r)] = m.data[sz(r * m.cols + c)];
  }
  return out;
}

template <typename T>
void matmul_raw(ThreadPool& pool, const T* x, int64_t n, const T* w, int64_t out, int64_t in,
                T scale, T* y, bool accumulate, const TrainGate* gate) {
  pool.parallel_for(out, kRowGrain, [&](int64_t begin, int64_t end) {
    for (int64_t t = 0; t < n; ++t) {
      if (gate != nullptr && gate->should_stop()) return;
      const T* xt = x + t * in;
      T* yt = y + t * out;
      for (int64_t o = begin; o < end; ++o) {
        const T v = scale * dot(xt, w + o * in, in);
        yt[o] = accumulate ? yt[o] + v : v;
      }
    }
  });
}

template <typename T>
void matmul(ThreadPool& pool, const T* x, int64_t n, const DenseMatrix<T>& w, T* y, bool accumulate,
            const TrainGate* gate) {
  matmul_raw(pool, x, n, w.data.data(), w.rows, w.cols, T{1}, y, accumulate, gate);
}

template <typename T>
void outer_sum(ThreadPool& pool, const T* a, int64_t n, int64_t m, const T* b, int64_t k, T scale,
               T* g) {
  pool.parallel_for(m, kRowGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      T* gi = g + i * k;
      for (int64_t t = 0; t < n; ++t) {
        const T s = scale * a[t * m + i];
        if (s == T{0}) continue;
        const T* bt = b + t * k;
        for (int64_t j = 0; j < k; ++j) gi[j] += s * bt[j];
      }
    }
  });
}

template <typename T>
void rms_norm_forward(const T* x, const float* w, int64_t n, int64_t d, float eps, T* y,
                      T* inv_rms) {
  for (int64_t t = 0; t < n; ++t) {
    const T* xt = x + t * d;
    double ss = 0.0;
    for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(xt[i]) * static_cast<double>(xt[i]);
    const T r = static_cast<T>(1.0 / std::sqrt(ss / static_cast<double>(d) + double{eps}));
    inv_rms[t] = r;
    for (int64_t i = 0; i < d; ++i) y[t * d + i] = xt[i] * r * static_cast<T>(w[i]);
  }
}

template <typename T>
void rms_norm_backward(const T* x, const float* w, const T* inv_rms, const T* dy, int64_t n,
                       int64_t d, T* dx) {
  for (int64_t t = 0; t < n; ++t) {
    const T* xt = x + t * d;
    const T* dyt = dy + t * d;
    const T r = inv_rms[t];
    T s = 0;  // Σ dy·w·x
    for (int64_t i = 0; i < d; ++i) s += dyt[i] * static_cast<T>(w[i]) * xt[i];
    const T c = r * r * r * s / static_cast<T>(d);
    for (int64_t i = 0; i < d; ++i) dx[t * d + i] += r * static_cast<T>(w[i]) * dyt[i] - c * xt[i];
  }
}

RopeTable make_rope_table(const kernels::RopeParams& p, const int32_t* positions, int64_t n) {
  RopeTable table;
  table.half = p.n_rot / 2;
  table.cos.resize(sz(n * table.half));
  table.sin.resize(table.cos.size());
  for (int64_t t = 0; t < n; ++t) {
    kernels::rope_angles(p, positions[t], table.cos.data() + t * table.half,
                         table.sin.data() + t * table.half);
  }
  return table;
}

template <typename T>
void rope_rotate(const kernels::RopeParams& p, const RopeTable& table, int64_t n, int64_t heads,
                 int64_t head_dim, int64_t stride, bool transpose, T* x) {
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      T* v = x + t * stride + h * head_dim;
      for (int64_t i = 0; i < table.half; ++i) {
        const int64_t a = p.neox ? i : 2 * i;
        const int64_t b = p.neox ? i + table.half : 2 * i + 1;
        const T c = static_cast<T>(table.cos[sz(t * table.half + i)]);
        const T s = static_cast<T>(transpose ? -table.sin[sz(t * table.half + i)]
                                             : table.sin[sz(t * table.half + i)]);
        const T x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
      }
    }
  }
}

#define KEEL_TRAIN_DENSE_OPS(T)                                                                    \
  template DenseMatrix<T> dequantize<T>(const kernels::Matrix&);                                   \
  template DenseMatrix<T> transpose<T>(const DenseMatrix<T>&);                                     \
  template void matmul<T>(ThreadPool&, const T*, int64_t, const DenseMatrix<T>&, T*, bool,         \
                          const TrainGate*);                                                       \
  template void matmul_raw<T>(ThreadPool&, const T*, int64_t, const T*, int64_t, int64_t, T, T*,   \
                              bool, const TrainGate*);                                             \
  template void outer_sum<T>(ThreadPool&, const T*, int64_t, int64_t, const T*, int64_t, T, T*);   \
  template void rms_norm_forward<T>(const T*, const float*, int64_t, int64_t, float, T*, T*);      \
  template void rms_norm_backward<T>(const T*, const float*, const T*, const T*, int64_t, int64_t, \
                                     T*);                                                          \
  template void rope_rotate<T>(const kernels::RopeParams&, const RopeTable&, int64_t, int64_t,     \
                               int64_t, int64_t, bool, T*);
KEEL_TRAIN_DENSE_OPS(float)
KEEL_TRAIN_DENSE_OPS(double)
#undef KEEL_TRAIN_DENSE_OPS

}  // namespace keel::train
