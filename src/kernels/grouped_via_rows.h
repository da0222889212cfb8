// A kernel for the row-group layout (weight_layout.h) built from a row-major kernel: each group
// of the range is copied to a buffer, put back in row-major order and multiplied by `kRowMajor`.
// The scalar table's grouped kernels (the reference: the same arithmetic as its row-major twins,
// hence bit-identical) are these. Compiled for the baseline ISA; it only calls through the
// pointer it is given. Pure; thread-safe (the buffer is per call).
#pragma once

#include <algorithm>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/weight_layout.h"

namespace keel::kernels {

template <MatmulFn kRowMajor>
void grouped_via_rows(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  const int64_t full = grouped_rows(task.w.rows);
  if (row_end > full) kRowMajor(task, std::max(row_begin, full), row_end);  // row-major tail
  const size_t group_bytes = kGroupRows * task.w.row_bytes;
  std::vector<std::byte> rows(group_bytes);
  for (int64_t r0 = row_begin / kGroupRows * kGroupRows; r0 < std::min(row_end, full);
       r0 += kGroupRows) {
    std::copy_n(task.w.data + static_cast<size_t>(r0) * task.w.row_bytes, group_bytes, rows.data());
    ungroup_rows_in_place(task.w.dtype, kGroupRows, task.w.row_bytes, rows.data());
    MatmulTask sub = task;  // rows r0.. of task as rows 0.. of `rows`; y keeps its row stride
    sub.w.data = rows.data();
    sub.w.layout = WeightLayout::kRows;
    sub.y = task.y + r0;
    const int64_t b = std::max(row_begin, r0) - r0, e = std::min(row_end, r0 + kGroupRows) - r0;
    kRowMajor(sub, b, e);
  }
}

}  // namespace keel::kernels
