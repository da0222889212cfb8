// Ops: runs each op through the dispatch table chosen at construction (the matmuls are in
// ops_matmul.cpp, paged attention in paged_attention.cpp). Element-wise ops split long inputs
// across the pool; every element is computed by the same arithmetic whatever the split.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/ops_scratch.h"
#include "kernels/rope.h"

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
  std::vector<float> cos_t(static_cast<size_t>(p.n_rot / 2)), sin_t(cos_t.size());
  for (int64_t t = 0; t < n_tokens; ++t) {
    rope_angles(p, positions[t], cos_t.data(), sin_t.data());
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
