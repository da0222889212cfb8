// The trainer's numeric kernels: plain loops over row-major arrays of T (float for training,
// double for the gradient check), explicitly instantiated for both. Each output element is
// computed by one call in one fixed order of its terms, whichever thread runs it and however many
// threads the pool has, so results are bit-identical for any thread count.
//
// Frozen weights reach these loops dequantized (DenseMatrix, from any type keel reads through
// kernels::dequantize_matrix_row), together with their transpose for input gradients.
// A stop flag (matmul, matmul_raw) makes a long product give up early: checked once per token
// row of each chunk, so a trainer asked to stop yields within a fraction of one matmul; the
// output is then partial and must be thrown away (the caller sees the flag and stops).
// Thread safety: the functions use `pool` and must be called from the pool's owner thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "train/train_gate.h"

namespace keel::train {

// A dense row-major matrix [rows][cols] of T.
template <typename T>
struct DenseMatrix {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<T> data;
};

// The values of `m` (any type and layout kernels::dequantize_matrix_row accepts) as T.
template <typename T>
DenseMatrix<T> dequantize(const kernels::Matrix& m);
// [cols][rows] of `m`.
template <typename T>
DenseMatrix<T> transpose(const DenseMatrix<T>& m);

// y[n][w.rows] = x[n][w.cols] · wᵀ, or += with `accumulate`; partial once the gate says stop
// (it may also make the workers wait, train_gate.h; null: neither).
template <typename T>
void matmul(ThreadPool& pool, const T* x, int64_t n, const DenseMatrix<T>& w, T* y, bool accumulate,
            const TrainGate* gate = nullptr);
// The same with w given as a raw [out][in] array (LoRA's A and B inside the parameter vector).
template <typename T>
void matmul_raw(ThreadPool& pool, const T* x, int64_t n, const T* w, int64_t out, int64_t in,
                T scale, T* y, bool accumulate, const TrainGate* gate = nullptr);
// g[m][k] += scale · Σ_t a[t][m] · b[t][k], the sum over t in order (weight gradients).
template <typename T>
void outer_sum(ThreadPool& pool, const T* a, int64_t n, int64_t m, const T* b, int64_t k, T scale,
               T* g);

// y[t] = x[t] / rms(x[t]) · w for n rows of d; inv_rms[t] = 1 / sqrt(mean(x[t]²) + eps).
template <typename T>
void rms_norm_forward(const T* x, const float* w, int64_t n, int64_t d, float eps, T* y,
                      T* inv_rms);
// dx[t] += ∂/∂x of rms_norm given dy[t] (inv_rms from the forward).
template <typename T>
void rms_norm_backward(const T* x, const float* w, const T* inv_rms, const T* dy, int64_t n,
                       int64_t d, T* dx);

// cos/sin of every rotated pair of every position, [n][n_rot/2], from kernels::rope_angles — the
// table keel's inference pass rotates with (linear scaling, llama3 factors and YaRN included;
// YaRN's mscale is folded into cos and sin).
struct RopeTable {
  int64_t half = 0;  // n_rot / 2
  std::vector<float> cos, sin;
};
RopeTable make_rope_table(const kernels::RopeParams& p, const int32_t* positions, int64_t n);
// Multiplies n rows (stride `stride`) of `heads` heads of `head_dim` by each pair's matrix
// [[c, −s], [s, c]] (forward), or by its transpose (`transpose`: the backward pass; with YaRN's
// mscale folded in the forward map is mscale·R, and its transpose is mscale·R⁻¹, not R⁻¹).
template <typename T>
void rope_rotate(const kernels::RopeParams& p, const RopeTable& table, int64_t n, int64_t heads,
                 int64_t head_dim, int64_t stride, bool transpose, T* x);

}  // namespace keel::train
