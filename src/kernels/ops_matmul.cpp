// Ops' matmuls. A call first prepares the activations once (rounded to f16/bf16, or quantized to
// Q8_0 / Q8_K blocks) into the Ops' scratch, shared read-only by all threads, then splits the
// output rows into ranges of whole row groups (kGroupRows, a multiple of every table's row tile)
// handed to the pool's threads dynamically. matmul_many does this for several matrices in one
// preparation and one job; silu_mul_matmul_many prepares each matrix's own input into its own
// part of the scratch and then runs all rows in one job. Each weight's kernel is the table's one
// for its type and layout. The fused forms produce their input rows (RMSNorm of x, or
// silu(gate)·up) token by token inside the preparation, into a per-thread row buffer, so the f32
// rows are never written out (F32 weights, which read f32 rows, get them materialised in the
// scratch).
//
// Every output is computed by the same per-row arithmetic whatever the split, fused or not, so
// results depend neither on the thread count nor on fusion. Owner thread only (uses the pool and
// the scratch).
#include <algorithm>

#include "core/check.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/ops_scratch.h"
#include "kernels/weight_layout.h"

namespace keel::kernels {

namespace {

// What matmul does to the activations before the row kernels run; weight types with the same
// format share one prepared copy.
enum class ActFormat { kF32, kF16, kBF16, kQ8_0, kQ8_K };

ActFormat act_format(DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return ActFormat::kF16;
    case DType::kBF16:
      return ActFormat::kBF16;
    case DType::kQ8_0:
    case DType::kQ4_0:
      return ActFormat::kQ8_0;
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return ActFormat::kQ8_K;
    default:
      return ActFormat::kF32;
  }
}

void check_matrix(const Matrix& w, int64_t n_tokens) {
  KEEL_CHECK_MSG(matmul_supports(w.dtype), "matmul: unsupported weight type");
  KEEL_CHECK_MSG(w.layout == WeightLayout::kRows || grouped_layout_supports(w.dtype),
                 "matmul: no row-group layout for this weight type");
  KEEL_CHECK(n_tokens >= 0 && w.rows >= 0 && w.cols >= 0);
  KEEL_CHECK(w.row_bytes >= dtype_row_bytes(w.dtype, w.cols));
}

}  // namespace

// Where a matmul's input rows come from.
struct Ops::RowSource {
  enum class Kind { kRows, kRmsNorm, kSiluMul };
  Kind kind = Kind::kRows;
  const float* x = nullptr;      // kRows, kRmsNorm: [n_tokens][cols]; kSiluMul: gate
  const float* other = nullptr;  // kRmsNorm: the norm weight [cols]; kSiluMul: up [n][cols]
  float eps = 0.0f;              // kRmsNorm

  // Token t's row: x's own row, or the transform computed into `buf` ([cols] floats).
  const float* row(const KernelTable& table, int64_t t, int64_t cols, float* buf) const {
    const float* in = x + t * cols;
    switch (kind) {
      case Kind::kRows:
        return in;
      case Kind::kRmsNorm:
        table.rms_norm(in, other, cols, eps, buf);
        return buf;
      case Kind::kSiluMul:
        table.silu_mul(in, other + t * cols, cols, buf);
        return buf;
    }
    return in;
  }
};

// Prepares the rows of every source (one source shared by all matrices, or one per matrix) into
// the scratch, laid end to end: source i's token t is row i·n_tokens + t. tasks[i] gets source
// i's activations.
void Ops::prepare_activations(DType dtype, std::span<const RowSource> srcs, int64_t n_tokens,
                              int64_t cols, MatmulTask* tasks) {
  const auto count = static_cast<int64_t>(srcs.size());
  const int64_t n_rows = count * n_tokens;
  const int64_t n = n_tokens * cols;  // one source's elements
  Scratch& s = *scratch_;
  const ActFormat format = act_format(dtype);
  if (format == ActFormat::kF32 && srcs[0].kind == RowSource::Kind::kRows) {
    for (int64_t i = 0; i < count; ++i) tasks[i].x = srcs[static_cast<size_t>(i)].x;
    return;
  }
  // A single token's rows are prepared on the calling thread (no pool job for decode).
  const int threads = n_tokens == 1 ? 1 : pool_->num_threads();
  // Produces every row into buf_of(row, thread) and hands it to fn(row, values), split across
  // threads when there are several tokens.
  auto per_row = [&](auto&& buf_of, auto&& fn) {
    auto job = [&](int idx, int nth) {
      for (int64_t r = n_rows * idx / nth; r < n_rows * (idx + 1) / nth; ++r) {
        const RowSource& src = srcs[static_cast<size_t>(r / n_tokens)];
        fn(r, src.row(*table_, r % n_tokens, cols, buf_of(r, idx)));
      }
    };
    if (threads == 1) return job(0, 1);
    pool_->run(job);
  };
  if (format == ActFormat::kF32) {  // a transformed source: its rows are the activations
    float* xr = grow(s.x, n_rows * cols);
    per_row([&](int64_t r, int) { return xr + r * cols; }, [](int64_t, const float*) {});
    for (int64_t i = 0; i < count; ++i) tasks[i].x = xr + i * n;
    return;
  }
  float* bufs = grow(s.rows, threads * cols);  // one scratch row per thread
  auto thread_row = [&](int64_t, int idx) { return bufs + idx * cols; };
  switch (format) {
    case ActFormat::kF16:
    case ActFormat::kBF16: {
      const RoundHalfFn round = format == ActFormat::kF16 ? table_->round_f16 : table_->round_bf16;
      float* xr = grow(s.x, n_rows * cols);
      uint16_t* x16 = grow(s.x16, n_rows * cols);
      per_row(thread_row, [&](int64_t r, const float* row) {
        round(row, cols, x16 + r * cols, xr + r * cols);
      });
      for (int64_t i = 0; i < count; ++i) {
        tasks[i].x = xr + i * n;
        tasks[i].x16 = x16 + i * n;
      }
      break;
    }
    case ActFormat::kQ8_0: {
      const int64_t nb = cols / 32;
      int8_t* qs = grow(s.qs, n_rows * cols);
      float* d = grow(s.d, n_rows * nb);
      int32_t* sum = grow(s.sum, n_rows * nb);
      per_row(thread_row, [&](int64_t r, const float* row) {
        table_->quantize_q8_0(row, cols, qs + r * cols, d + r * nb, sum + r * nb);
      });
      for (int64_t i = 0; i < count; ++i) {
        tasks[i].q8 = {qs + i * n, d + i * n_tokens * nb, sum + i * n_tokens * nb};
      }
      break;
    }
    case ActFormat::kQ8_K: {
      const int64_t nb = cols / 256;
      int8_t* qs = grow(s.qs, n_rows * cols);
      float* d = grow(s.d, n_rows * nb);
      int16_t* bsums = grow(s.bsums, n_rows * cols / 16);
      per_row(thread_row, [&](int64_t r, const float* row) {
        table_->quantize_q8_k(row, cols, qs + r * cols, d + r * nb, bsums + r * (cols / 16));
      });
      for (int64_t i = 0; i < count; ++i) {
        tasks[i].q8k = {qs + i * n, d + i * n_tokens * nb, bsums + i * (n / 16)};
      }
      break;
    }
    case ActFormat::kF32:  // handled above
      break;
  }
}

// `srcs` holds one source shared by every matrix, or one per matrix.
void Ops::run_matmuls(std::span<const Matrix> ws, std::span<const RowSource> srcs, int64_t n_tokens,
                      std::span<float* const> ys) {
  KEEL_CHECK(ws.size() == ys.size() && ws.size() <= kMaxMatmulMany);
  KEEL_CHECK(srcs.size() == 1 || srcs.size() == ws.size());
  const bool own_sources = srcs.size() > 1;
  bool shared = true;
  for (const Matrix& w : ws) {
    check_matrix(w, n_tokens);
    KEEL_CHECK(w.cols == ws[0].cols);
    shared = shared && act_format(w.dtype) == act_format(ws[0].dtype);
  }
  if (!shared) {  // one preparation and one job per matrix
    for (size_t i = 0; i < ws.size(); ++i) {
      run_matmuls(ws.subspan(i, 1), own_sources ? srcs.subspan(i, 1) : srcs, n_tokens,
                  ys.subspan(i, 1));
    }
    return;
  }
  if (n_tokens == 0 || ws.empty()) return;

  MatmulTask tasks[kMaxMatmulMany];
  MatmulFn fns[kMaxMatmulMany];
  int64_t first_row[kMaxMatmulMany + 1] = {0};
  prepare_activations(ws[0].dtype, srcs, n_tokens, ws[0].cols, tasks);
  for (size_t i = 0; i < ws.size(); ++i) {
    if (!own_sources) tasks[i] = tasks[0];  // the shared activations
    tasks[i].w = ws[i];
    tasks[i].n_tokens = n_tokens;
    tasks[i].y = ys[i];
    fns[i] = matmul_kernel(*table_, ws[i].dtype, ws[i].layout);
    // Each matrix starts on a group boundary of the joint range.
    first_row[i + 1] = first_row[i] + (ws[i].rows + kGroupRows - 1) / kGroupRows * kGroupRows;
  }
  // One job over the matrices' rows laid end to end; a range may span several matrices.
  const size_t count = ws.size();
  pool_->parallel_for(first_row[count], kGroupRows, [&](int64_t begin, int64_t end) {
    for (size_t i = 0; i < count; ++i) {
      const int64_t b = std::max(begin, first_row[i]);
      const int64_t e = std::min(end, first_row[i] + ws[i].rows);
      if (b < e) fns[i](tasks[i], b - first_row[i], e - first_row[i]);
    }
  });
}

void Ops::matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y) {
  matmul_many({&w, 1}, x, n_tokens, {&y, 1});
}

void Ops::matmul_many(std::span<const Matrix> ws, const float* x, int64_t n_tokens,
                      std::span<float* const> ys) {
  RowSource src;
  src.x = x;
  run_matmuls(ws, {&src, 1}, n_tokens, ys);
}

void Ops::rms_norm_matmul_many(std::span<const Matrix> ws, const float* x, const float* norm_weight,
                               float eps, int64_t n_tokens, std::span<float* const> ys) {
  RowSource src;
  src.kind = RowSource::Kind::kRmsNorm;
  src.x = x;
  src.other = norm_weight;
  src.eps = eps;
  run_matmuls(ws, {&src, 1}, n_tokens, ys);
}

void Ops::silu_mul_matmul(const Matrix& w, const float* gate, const float* up, int64_t n_tokens,
                          float* y) {
  silu_mul_matmul_many({&w, 1}, {&gate, 1}, {&up, 1}, n_tokens, {&y, 1});
}

void Ops::silu_mul_matmul_many(std::span<const Matrix> ws, std::span<const float* const> gate,
                               std::span<const float* const> up, int64_t n_tokens,
                               std::span<float* const> ys) {
  KEEL_CHECK(gate.size() == ws.size() && up.size() == ws.size() && ws.size() <= kMaxMatmulMany);
  if (ws.empty()) return;
  RowSource srcs[kMaxMatmulMany];
  for (size_t i = 0; i < ws.size(); ++i) {
    srcs[i].kind = RowSource::Kind::kSiluMul;
    srcs[i].x = gate[i];
    srcs[i].other = up[i];
  }
  run_matmuls(ws, {srcs, ws.size()}, n_tokens, ys);
}

}  // namespace keel::kernels
