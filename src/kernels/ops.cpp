// Ops: runs each op through the dispatch table chosen at construction. matmul prepares the
// activations once per call (rounded to f16/bf16, or quantized to Q8_0 / Q8_K blocks) into the
// Ops' scratch, shared read-only by all threads, then splits the output rows into contiguous
// ranges (multiples of the table's row tile) across the pool; matmul_many does the same for
// several matrices at once (one preparation, one job). Every row's value is computed by
// the same per-row arithmetic whatever the split, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/ops_scratch.h"

namespace keel::kernels {

namespace {

// Element-wise ops are split across threads only above this many elements.
constexpr int64_t kParallelElements = 1 << 16;

}  // namespace

Ops::Ops(Isa isa, ThreadPool* pool, const CpuFeatures& cpu)
    : isa_(isa),
      pool_(pool),
      table_(&kernel_table(isa, cpu)),
      scratch_(std::make_unique<Scratch>()) {
  KEEL_CHECK(pool_ != nullptr);
}

Ops::Ops(Isa isa, ThreadPool* pool) : Ops(isa, pool, detect_cpu_features()) {}

Ops::~Ops() = default;

std::string_view Ops::kernel_name() const { return table_->name; }

namespace {

// What matmul does to the activations before the row kernels run; weight types with the same
// format can share one prepared copy.
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
  KEEL_CHECK(n_tokens >= 0 && w.rows >= 0 && w.cols >= 0);
  KEEL_CHECK(w.row_bytes >= dtype_row_bytes(w.dtype, w.cols));
}

}  // namespace

// Fills the activation fields of `task` for weights of `dtype`: x itself, or x rounded /
// quantized into the scratch (split across threads when there are several tokens).
void Ops::prepare_activations(DType dtype, const float* x, int64_t n_tokens, int64_t cols,
                              MatmulTask* task) {
  const int64_t n = n_tokens * cols;
  Scratch& s = *scratch_;
  auto per_token = [&](auto&& fn) {
    if (n_tokens == 1) {
      fn(0);
      return;
    }
    pool_->parallel_for(n_tokens, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) fn(t);
    });
  };
  switch (act_format(dtype)) {
    case ActFormat::kF16:
    case ActFormat::kBF16: {
      const RoundHalfFn round = dtype == DType::kF16 ? table_->round_f16 : table_->round_bf16;
      float* xr = grow(s.x, n);
      uint16_t* x16 = grow(s.x16, n);
      per_token([&](int64_t t) { round(x + t * cols, cols, x16 + t * cols, xr + t * cols); });
      task->x = xr;
      task->x16 = x16;
      break;
    }
    case ActFormat::kQ8_0: {
      const int64_t nb = cols / 32;
      int8_t* qs = grow(s.qs, n);
      float* d = grow(s.d, n_tokens * nb);
      int32_t* sum = grow(s.sum, n_tokens * nb);
      per_token([&](int64_t t) {
        table_->quantize_q8_0(x + t * cols, cols, qs + t * cols, d + t * nb, sum + t * nb);
      });
      task->q8 = {qs, d, sum};
      break;
    }
    case ActFormat::kQ8_K: {
      const int64_t nb = cols / 256;
      int8_t* qs = grow(s.qs, n);
      float* d = grow(s.d, n_tokens * nb);
      int16_t* bsums = grow(s.bsums, n / 16);
      per_token([&](int64_t t) {
        table_->quantize_q8_k(x + t * cols, cols, qs + t * cols, d + t * nb,
                              bsums + t * (cols / 16));
      });
      task->q8k = {qs, d, bsums};
      break;
    }
    case ActFormat::kF32:
      task->x = x;
      break;
  }
}

void Ops::matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y) {
  matmul_many({&w, 1}, x, n_tokens, {&y, 1});
}

void Ops::matmul_many(std::span<const Matrix> ws, const float* x, int64_t n_tokens,
                      std::span<float* const> ys) {
  KEEL_CHECK(ws.size() == ys.size() && ws.size() <= kMaxMatmulMany);
  bool shared = true;
  for (const Matrix& w : ws) {
    check_matrix(w, n_tokens);
    KEEL_CHECK(w.cols == ws[0].cols);
    shared = shared && act_format(w.dtype) == act_format(ws[0].dtype);
  }
  if (!shared) {  // one call per matrix, each preparing its own activations
    for (size_t i = 0; i < ws.size(); ++i)
      matmul_many(ws.subspan(i, 1), x, n_tokens, ys.subspan(i, 1));
    return;
  }
  if (n_tokens == 0 || ws.empty()) return;

  MatmulTask tasks[kMaxMatmulMany];
  MatmulFn fns[kMaxMatmulMany];
  int64_t first_row[kMaxMatmulMany + 1] = {0};
  prepare_activations(ws[0].dtype, x, n_tokens, ws[0].cols, &tasks[0]);
  for (size_t i = 0; i < ws.size(); ++i) {
    tasks[i] = tasks[0];  // the shared activations
    tasks[i].w = ws[i];
    tasks[i].n_tokens = n_tokens;
    tasks[i].y = ys[i];
    fns[i] = matmul_kernel(*table_, ws[i].dtype);
    first_row[i + 1] = first_row[i] + ws[i].rows;
  }
  // One job over the matrices' rows laid end to end; each thread's range may span several.
  const size_t count = ws.size();
  pool_->parallel_for(first_row[count], table_->row_tile, [&](int64_t begin, int64_t end) {
    for (size_t i = 0; i < count; ++i) {
      const int64_t b = std::max(begin, first_row[i]), e = std::min(end, first_row[i + 1]);
      if (b < e) fns[i](tasks[i], b - first_row[i], e - first_row[i]);
    }
  });
}

void Ops::rms_norm(const float* x, const float* weight, int64_t n_rows, int64_t dim, float eps,
                   float* out) {
  const auto kernel = table_->rms_norm;
  if (n_rows > 1 && n_rows * dim >= kParallelElements) {
    pool_->parallel_for(n_rows, 1, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) kernel(x + r * dim, weight, dim, eps, out + r * dim);
    });
    return;
  }
  for (int64_t r = 0; r < n_rows; ++r) kernel(x + r * dim, weight, dim, eps, out + r * dim);
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
  const auto kernel = table_->silu_mul;
  if (n >= kParallelElements) {
    pool_->parallel_for(n, 1024,
                        [&](int64_t b, int64_t e) { kernel(gate + b, up + b, e - b, out + b); });
    return;
  }
  kernel(gate, up, n, out);
}

void Ops::add(const float* x, int64_t n, float* y) {
  const auto kernel = table_->add;
  if (n >= kParallelElements) {
    pool_->parallel_for(n, 1024, [&](int64_t b, int64_t e) { kernel(x + b, e - b, y + b); });
    return;
  }
  kernel(x, n, y);
}

}  // namespace keel::kernels
