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

struct Field {
  int offset;  // in a row's block
  int length;  // bytes
  int unit;    // bytes kept together per row
};

struct GroupedFormat {
  int block_bytes = 0;  // bytes of one row's block
  std::span<const Field> fields;
};

constexpr Field kQ8_0Fields[] = {{0, 2, 2}, {2, 32, 4}};
constexpr Field kQ4_0Fields[] = {{0, 2, 2}, {2, 16, 4}};
constexpr Field kQ4_KFields[] = {{0, 2, 2}, {2, 2, 2}, {4, 12, 1}, {16, 128, 4}};
constexpr Field kQ5_KFields[] = {{0, 2, 2}, {2, 2, 2}, {4, 12, 1}, {16, 32, 4}, {48, 128, 4}};
constexpr Field kQ6_KFields[] = {{0, 128, 4}, {128, 64, 4}, {192, 16, 1}, {208, 2, 2}};

GroupedFormat grouped_format(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0:
      return {34, kQ8_0Fields};
    case DType::kQ4_0:
      return {18, kQ4_0Fields};
    case DType::kQ4_K:
      return {144, kQ4_KFields};
    case DType::kQ5_K:
      return {176, kQ5_KFields};
    case DType::kQ6_K:
      return {210, kQ6_KFields};
    default:
      return {};
  }
}

// Copies one group (16 rows of row_bytes) between row-major `rows` and grouped `grouped`
// (to_grouped: rows → grouped; else grouped → rows).
void convert_group(const GroupedFormat& f, size_t row_bytes, std::byte* rows, std::byte* grouped,
                   bool to_grouped) {
  const size_t nb = row_bytes / static_cast<size_t>(f.block_bytes);
  for (size_t b = 0; b < nb; ++b) {
    std::byte* gblk = grouped + b * kGroupRows * static_cast<size_t>(f.block_bytes);
    for (const Field& field : f.fields) {
      const int units = field.length / field.unit;
      for (int r = 0; r < kGroupRows; ++r) {
        std::byte* rblk = rows + static_cast<size_t>(r) * row_bytes + b * f.block_bytes;
        for (int k = 0; k < units; ++k) {
          std::byte* g = gblk + kGroupRows * field.offset + (k * kGroupRows + r) * field.unit;
          std::byte* s = rblk + field.offset + k * field.unit;
          if (to_grouped) {
            std::memcpy(g, s, static_cast<size_t>(field.unit));
          } else {
            std::memcpy(s, g, static_cast<size_t>(field.unit));
          }
        }
      }
    }
  }
}

void convert_groups(DType dtype, int64_t rows, size_t row_bytes, std::byte* data, bool to_grouped,
                    int64_t g_begin, int64_t g_end) {
  const GroupedFormat f = grouped_format(dtype);
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
  const GroupedFormat f = grouped_format(m.dtype);
  KEEL_CHECK(f.block_bytes > 0);
  const int64_t in_group = r % kGroupRows;
  const std::byte* group = m.data + static_cast<size_t>(r - in_group) * m.row_bytes;
  const size_t nb = m.row_bytes / static_cast<size_t>(f.block_bytes);
  for (size_t b = 0; b < nb; ++b) {
    const std::byte* gblk = group + b * kGroupRows * static_cast<size_t>(f.block_bytes);
    std::byte* rblk = out + b * static_cast<size_t>(f.block_bytes);
    for (const Field& field : f.fields) {
      for (int k = 0; k < field.length / field.unit; ++k) {
        std::memcpy(rblk + field.offset + k * field.unit,
                    gblk + kGroupRows * field.offset + (k * kGroupRows + in_group) * field.unit,
                    static_cast<size_t>(field.unit));
      }
    }
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
