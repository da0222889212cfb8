// The row-group weight layout: quantized matrices rewritten once at load so that decode reads
// every weight byte in one sequential stream and one 64-byte load feeds 16 rows at once.
//
// In WeightLayout::kGrouped16 a matrix's rows come in groups of kGroupRows = 16. Group g (rows
// 16g .. 16g+15) occupies exactly the bytes it occupies in GGUF's row-major order (16·row_bytes
// from data + 16g·row_bytes); inside it, block (or super-block) b of the 16 rows comes first for
// b = 0, 1, …, and each group block is a sequence of vectors: a vector takes the same U bytes at
// offset o of each of the 16 rows' blocks, stored row after row (16·U bytes). The vectors, in
// storage order ((o, length, U): length/U vectors of U bytes from o):
//   Q8_0 (34 B):  d (0, 2, 2), qs (2, 32, 4)
//   Q4_0 (18 B):  d (0, 2, 2), qs (2, 16, 4)
//   Q4_K (144 B): d, dmin (0, 4, 2), scales (4, 12, 1), qs (16, 128, 4)
//   Q5_K (176 B): d, dmin (0, 4, 2), scales (4, 12, 1), qh (16, 32, 4), qs (48, 128, 4)
//   Q6_K (210 B): for h = 0, 1 and j = 0..7 the three quad vectors the kernel reads together —
//                 ql (64h + 4j), ql (64h + 32 + 4j), qh (128 + 32h + 4j), each U = 4 — then
//                 scales (192, 16, 1), d (208, 2, 2)
// So a 64-byte vector of quants holds 4 quant bytes of each of the 16 rows, the 16 rows' fp16
// scales are one 32-byte vector, a K-quant scale byte of the 16 rows is one 16-byte vector, and
// a kernel reads each group block front to back. The bytes are a permutation of the GGUF bytes:
// same size, nothing lost. Rows past the last full group (rows % 16 of them) stay in row-major
// order after the groups.
//
// Pure functions; thread-safe on disjoint data.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"

namespace keel::kernels {

inline constexpr int64_t kGroupRows = 16;

// True for the types that have a kGrouped16 form: Q8_0, Q4_0, Q4_K, Q5_K, Q6_K.
bool grouped_layout_supports(DType dtype);
// True for the types the loader groups (model/group_weights): those whose grouped decode kernels
// measured faster than their row-major ones — Q8_0, Q4_0, Q4_K, Q5_K. Q6_K's grouped kernels
// streamed a 5632x2048 matrix 1.3-1.4x slower than the row-major ones on both AVX2 and AVX-512
// (keel_kernels_bench, docs/benchmarks.md), so Q6_K stays row-major at load.
bool grouped_layout_preferred(DType dtype);

// Rows of `rows` that lie in full groups (the rest stay row-major).
inline int64_t grouped_rows(int64_t rows) { return rows / kGroupRows * kGroupRows; }

// Rewrites `rows` rows of `row_bytes` bytes at `data` from row-major to kGrouped16 order in place
// (`pool`, when given, splits the groups across its threads). dtype must be supported.
void group_rows_in_place(DType dtype, int64_t rows, size_t row_bytes, std::byte* data,
                         ThreadPool* pool = nullptr);
// The inverse: kGrouped16 back to row-major.
void ungroup_rows_in_place(DType dtype, int64_t rows, size_t row_bytes, std::byte* data);

// Copies row r of `m` in GGUF's row-major byte order (m.row_bytes bytes) to `out`, whatever
// m.layout is.
void read_row(const Matrix& m, int64_t r, std::byte* out);

// Row r of `m` as floats (m.cols of them), whatever the layout (the embedding lookup).
void dequantize_matrix_row(const Matrix& m, int64_t r, float* out);

}  // namespace keel::kernels
