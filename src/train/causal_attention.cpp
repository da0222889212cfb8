// attention_forward / attention_backward (causal_attention.h).
#include "train/causal_attention.h"

#include <cmath>
#include <vector>

#include "core/index_cast.h"

namespace keel::train {
namespace {

template <typename T>
T head_dot(const T* a, const T* b, int64_t n) {
  T s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

template <typename T>
void attention_forward(ThreadPool& pool, const AttentionShape& s, const T* q, const T* k,
                       const T* v, T* out, T* lse) {
  const int64_t hd = s.head_dim, q_dim = s.n_head * hd, kv_dim = s.n_head_kv * hd;
  const int64_t group = s.n_head / s.n_head_kv;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
  pool.parallel_for(s.n_head, 1, [&](int64_t h_begin, int64_t h_end) {
    std::vector<T> score(sz(s.n));
    for (int64_t h = h_begin; h < h_end; ++h) {
      const int64_t g = h / group;
      for (int64_t t = 0; t < s.n; ++t) {
        const T* qt = q + t * q_dim + h * hd;
        T m = -INFINITY;
        for (int64_t j = 0; j <= t; ++j) {
          score[sz(j)] = scale * head_dot(qt, k + j * kv_dim + g * hd, hd);
          m = std::max(m, score[sz(j)]);
        }
        T sum = 0;
        for (int64_t j = 0; j <= t; ++j) {
          score[sz(j)] = std::exp(score[sz(j)] - m);
          sum += score[sz(j)];
        }
        T* ot = out + t * q_dim + h * hd;
        for (int64_t i = 0; i < hd; ++i) ot[i] = 0;
        for (int64_t j = 0; j <= t; ++j) {
          const T p = score[sz(j)] / sum;
          const T* vj = v + j * kv_dim + g * hd;
          for (int64_t i = 0; i < hd; ++i) ot[i] += p * vj[i];
        }
        lse[h * s.n + t] = m + std::log(sum);
      }
    }
  });
}

template <typename T>
void attention_backward(ThreadPool& pool, const AttentionShape& s, const T* q, const T* k,
                        const T* v, const T* out, const T* lse, const T* dout, T* dq, T* dk,
                        T* dv) {
  const int64_t hd = s.head_dim, q_dim = s.n_head * hd, kv_dim = s.n_head_kv * hd;
  const int64_t group = s.n_head / s.n_head_kv;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
  // One KV head per call: its dk/dv rows are written by no other.
  pool.parallel_for(s.n_head_kv, 1, [&](int64_t g_begin, int64_t g_end) {
    for (int64_t g = g_begin; g < g_end; ++g) {
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        for (int64_t t = 0; t < s.n; ++t) {
          const T* qt = q + t * q_dim + h * hd;
          const T* dot_ = dout + t * q_dim + h * hd;
          const T delta = head_dot(dot_, out + t * q_dim + h * hd, hd);  // Σ_j p_j · (dout·v_j)
          const T l = lse[h * s.n + t];
          T* dqt = dq + t * q_dim + h * hd;
          for (int64_t j = 0; j <= t; ++j) {
            const T* kj = k + j * kv_dim + g * hd;
            const T* vj = v + j * kv_dim + g * hd;
            const T p = std::exp(scale * head_dot(qt, kj, hd) - l);
            const T ds = p * (head_dot(dot_, vj, hd) - delta) * scale;
            T* dkj = dk + j * kv_dim + g * hd;
            T* dvj = dv + j * kv_dim + g * hd;
            for (int64_t i = 0; i < hd; ++i) {
              dqt[i] += ds * kj[i];
              dkj[i] += ds * qt[i];
              dvj[i] += p * dot_[i];
            }
          }
        }
      }
    }
  });
}

template void attention_forward<float>(ThreadPool&, const AttentionShape&, const float*,
                                       const float*, const float*, float*, float*);
template void attention_forward<double>(ThreadPool&, const AttentionShape&, const double*,
                                        const double*, const double*, double*, double*);
template void attention_backward<float>(ThreadPool&, const AttentionShape&, const float*,
                                        const float*, const float*, const float*, const float*,
                                        const float*, float*, float*, float*);
template void attention_backward<double>(ThreadPool&, const AttentionShape&, const double*,
                                         const double*, const double*, const double*, const double*,
                                         const double*, double*, double*, double*);

}  // namespace keel::train
