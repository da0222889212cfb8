// group_weights: match each matrix view to its tensor, skip aliased tensors, rewrite the rest.
#include "model/group_weights.h"

#include <algorithm>
#include <vector>

#include "kernels/weight_layout.h"

namespace keel::model {
namespace {

// The matrices the forward pass multiplies by (an untied token_embd is only read row by row, and
// keeps the GGUF layout; a tied one is `output` and is grouped with it).
std::vector<kernels::Matrix*> matrices(Weights& w) {
  std::vector<kernels::Matrix*> out = {&w.output};
  if (w.tied_output) out.push_back(&w.token_embd);
  for (LayerWeights& l : w.layers) {
    for (kernels::Matrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      out.push_back(m);
    }
  }
  return out;
}

// Tensors (by index) whose byte range overlaps another tensor's.
std::vector<bool> aliased_tensors(const gguf::GgufFile& file) {
  const auto& tensors = file.tensors();
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors[a].offset < tensors[b].offset; });
  std::vector<bool> aliased(tensors.size(), false);
  uint64_t reach = 0;  // the furthest end of the tensors before, in offset order
  size_t reach_idx = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const gguf::TensorInfo& t = tensors[order[k]];
    if (k > 0 && t.num_bytes > 0 && t.offset < reach) {
      aliased[order[k]] = true;
      aliased[reach_idx] = true;
    }
    if (t.offset + t.num_bytes > reach) {
      reach = t.offset + t.num_bytes;
      reach_idx = order[k];
    }
  }
  return aliased;
}

}  // namespace

int group_weights(gguf::GgufFile& file, Weights& w, ThreadPool* pool) {
  const std::vector<bool> aliased = aliased_tensors(file);
  const std::vector<kernels::Matrix*> views = matrices(w);
  int rewritten = 0;
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const gguf::TensorInfo& info = file.tensors()[i];
    if (aliased[i] || !kernels::grouped_layout_preferred(info.dtype)) continue;
    const std::byte* bytes = file.tensor_data(info).data();
    std::vector<kernels::Matrix*> users;
    for (kernels::Matrix* m : views) {
      if (m->data == bytes && m->layout == kernels::WeightLayout::kRows) users.push_back(m);
    }
    if (users.empty()) continue;
    const std::span<std::byte> out = file.mutable_tensor_data(info);
    if (out.empty()) return rewritten;  // mapped: nothing can be rewritten
    const kernels::Matrix& m = *users.front();
    kernels::group_rows_in_place(m.dtype, m.rows, m.row_bytes, out.data(), pool);
    for (kernels::Matrix* u : users) u->layout = kernels::WeightLayout::kGrouped16;
    ++rewritten;
  }
  return rewritten;
}

}  // namespace keel::model
