// The kGrouped16 permutation (see weight_layout.h): one table of fields per type, and the copies
// between one group's row-major bytes and its grouped bytes. Scalar code; the layout it writes is
// what the SIMD kernels read.
#include "kernels/weight_layout.h"

#include <cstring>
#include <span>
#include <vector>

#include "core/check.h"

namespace keel::kernels {
namespace {

// One stored vector of a group's block: bytes [offset, offset + unit) of each of the 16 rows'
// blocks, stored row after row (16·unit bytes). A format lists its vectors in storage order.
struct Vec {
  int offset;
  int unit;
};

constexpr int kMaxVecs = 96;

struct GroupedFormat {
  int block_bytes = 0;  // bytes of one row's block
  int n_vecs = 0;
  Vec vecs[kMaxVecs] = {};

  // `length` bytes from `offset` in vectors of `unit` bytes.
  constexpr void field(int offset, int length, int unit) {
    for (int k = 0; k < length / unit; ++k) vecs[n_vecs++] = {offset + k * unit, unit};
  }
};

constexpr GroupedFormat make_format(DType dtype) {
  GroupedFormat f;
  switch (dtype) {
    case DType::kQ8_0:
      f.block_bytes = 34;
      f.field(0, 2, 2);
      f.field(2, 32, 4);
      break;
    case DType::kQ4_0:
      f.block_bytes = 18;
      f.field(0, 2, 2);
      f.field(2, 16, 4);
      break;
    case DType::kQ4_K:
      f.block_bytes = 144;
      f.field(0, 4, 2);  // d, dmin
      f.field(4, 12, 1);
      f.field(16, 128, 4);
      break;
    case DType::kQ5_K:
      f.block_bytes = 176;
      f.field(0, 4, 2);
      f.field(4, 12, 1);
      f.field(16, 32, 4);  // qh
      f.field(48, 128, 4);
      break;
    case DType::kQ6_K:  // quants in the order the kernels read them (weight_layout.h)
      f.block_bytes = 210;
      for (int h = 0; h < 2; ++h) {
        for (int j = 0; j < 8; ++j) {
          f.field(64 * h + 4 * j, 4, 4);        // ql quad 16h + j
          f.field(64 * h + 32 + 4 * j, 4, 4);   // ql quad 16h + 8 + j
          f.field(128 + 32 * h + 4 * j, 4, 4);  // qh quad 8h + j
        }
      }
      f.field(192, 16, 1);
      f.field(208, 2, 2);
      break;
    default:
      break;
  }
  return f;
}

constexpr GroupedFormat kQ8_0Format = make_format(DType::kQ8_0);
constexpr GroupedFormat kQ4_0Format = make_format(DType::kQ4_0);
constexpr GroupedFormat kQ4_KFormat = make_format(DType::kQ4_K);
constexpr GroupedFormat kQ5_KFormat = make_format(DType::kQ5_K);
constexpr GroupedFormat kQ6_KFormat = make_format(DType::kQ6_K);
constexpr GroupedFormat kNoFormat{};

const GroupedFormat& grouped_format(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0:
      return kQ8_0Format;
    case DType::kQ4_0:
      return kQ4_0Format;
    case DType::kQ4_K:
      return kQ4_KFormat;
    case DType::kQ5_K:
      return kQ5_KFormat;
    case DType::kQ6_K:
      return kQ6_KFormat;
    default:
      return kNoFormat;
  }
}

// Copies row `r` of a group's block between its row-major block `rblk` and the group's block
// `gblk` (to_grouped: rblk → gblk).
void convert_row_block(const GroupedFormat& f, std::byte* rblk, std::byte* gblk, int r,
                       bool to_grouped) {
  int pos = 0;  // offset of the current vector in the group's block
  for (int v = 0; v < f.n_vecs; ++v) {
    const Vec& vec = f.vecs[v];
    std::byte* g = gblk + pos + r * vec.unit;
    std::byte* s = rblk + vec.offset;
    if (to_grouped) {
      std::memcpy(g, s, static_cast<size_t>(vec.unit));
    } else {
      std::memcpy(s, g, static_cast<size_t>(vec.unit));
    }
    pos += kGroupRows * vec.unit;
  }
}

// Copies one group (16 rows of row_bytes) between row-major `rows` and grouped `grouped`
// (to_grouped: rows → grouped; else grouped → rows).
void convert_group(const GroupedFormat& f, size_t row_bytes, std::byte* rows, std::byte* grouped,
                   bool to_grouped) {
  const size_t nb = row_bytes / static_cast<size_t>(f.block_bytes);
  for (size_t b = 0; b < nb; ++b) {
    std::byte* gblk = grouped + b * kGroupRows * static_cast<size_t>(f.block_bytes);
    for (int r = 0; r < kGroupRows; ++r) {
      std::byte* rblk = rows + static_cast<size_t>(r) * row_bytes + b * f.block_bytes;
      convert_row_block(f, rblk, gblk, r, to_grouped);
    }
  }
}

void convert_groups(DType dtype, int64_t rows, size_t row_bytes, std::byte* data, bool to_grouped,
                    int64_t g_begin, int64_t g_end) {
  const GroupedFormat& f = grouped_format(dtype);
  KEEL_CHECK_MSG(f.block_bytes > 0, "grouped layout: unsupported weight type");
  KEEL_CHECK(row_bytes % static_cast<size_t>(f.block_bytes) == 0);
  KEEL_CHECK(g_end <= rows / kGroupRows);
  const size_t group_bytes = kGroupRows * row_bytes;
  std::vector<std::byte> tmp(group_bytes);
  for (int64_t g = g_begin; g < g_end; ++g) {
    std::byte* p = data + static_cast<size_t>(g) * group_bytes;
    std::memcpy(tmp.data(), p, group_bytes);
    if (to_grouped) {
      convert_group(f, row_bytes, tmp.data(), p, true);
    } else {
      convert_group(f, row_bytes, p, tmp.data(), false);
    }
  }
}

}  // namespace

bool grouped_layout_supports(DType dtype) { return grouped_format(dtype).block_bytes > 0; }

bool grouped_layout_preferred(DType dtype) {
  return grouped_layout_supports(dtype) && dtype != DType::kQ6_K;
}

void group_rows_in_place(DType dtype, int64_t rows, size_t row_bytes, std::byte* data,
                         ThreadPool* pool) {
  const int64_t groups = rows / kGroupRows;
  if (pool == nullptr || pool->num_threads() == 1) {
    convert_groups(dtype, rows, row_bytes, data, true, 0, groups);
    return;
  }
  pool->parallel_for(groups, 1, [&](int64_t b, int64_t e) {
    convert_groups(dtype, rows, row_bytes, data, true, b, e);
  });
}

void ungroup_rows_in_place(DType dtype, int64_t rows, size_t row_bytes, std::byte* data) {
  convert_groups(dtype, rows, row_bytes, data, false, 0, rows / kGroupRows);
}

void read_row(const Matrix& m, int64_t r, std::byte* out) {
  KEEL_CHECK(r >= 0 && r < m.rows);
  const std::byte* src = m.data + static_cast<size_t>(r) * m.row_bytes;
  if (m.layout == WeightLayout::kRows || r >= grouped_rows(m.rows)) {
    std::memcpy(out, src, m.row_bytes);
    return;
  }
  const GroupedFormat& f = grouped_format(m.dtype);
  KEEL_CHECK(f.block_bytes > 0);
  const int64_t in_group = r % kGroupRows;
  const std::byte* group = m.data + static_cast<size_t>(r - in_group) * m.row_bytes;
  const size_t nb = m.row_bytes / static_cast<size_t>(f.block_bytes);
  for (size_t b = 0; b < nb; ++b) {
    // convert_row_block only reads the source side.
    auto* gblk =
        const_cast<std::byte*>(group + b * kGroupRows * static_cast<size_t>(f.block_bytes));
    convert_row_block(f, out + b * static_cast<size_t>(f.block_bytes), gblk,
                      static_cast<int>(in_group), false);
  }
}

void dequantize_matrix_row(const Matrix& m, int64_t r, float* out) {
  if (m.layout == WeightLayout::kRows) {
    dequantize_row(m.dtype, m.data + static_cast<size_t>(r) * m.row_bytes, out, m.cols);
    return;
  }
  std::vector<std::byte> row(m.row_bytes);
  read_row(m, r, row.data());
  dequantize_row(m.dtype, row.data(), out, m.cols);
}

}  // namespace keel::kernels
