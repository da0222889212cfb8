// group_weights: match each matrix view to its tensor, skip aliased tensors, rewrite the rest —
// the bytes the views cover, so an expert shard's unviewed (unread) experts stay untouched.
// Empty views (an expert shard's, model/expert_shard.h) are ignored throughout.
#include "model/group_weights.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "gguf/byte_ranges.h"
#include "kernels/weight_layout.h"

namespace keel::model {
namespace {

// The matrices the forward pass multiplies by (an untied token_embd is only read row by row, and
// keeps the GGUF layout; a tied one is `output` and is grouped with it).
// W is Weights or const Weights.
template <typename W>
auto matrices(W& w) {
  using M = std::remove_reference_t<decltype((w.output))>;  // (const) kernels::Matrix
  std::vector<M*> out = {&w.output};
  if (w.tied_output) out.push_back(&w.token_embd);
  for (auto& l : w.layers) {
    for (M* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.moe.router,
                 &l.moe.shared_gate, &l.moe.shared_up, &l.moe.shared_down}) {
      out.push_back(m);
    }
    for (auto* bank : {&l.moe.gate, &l.moe.up, &l.moe.down}) {
      for (M& m : *bank) out.push_back(&m);
    }
  }
  // Absent matrices (a dense layer's experts, an MoE layer's dense FFN) and an expert shard's
  // emptied views.
  std::erase_if(out, [](M* m) { return m->data == nullptr; });
  return out;
}

// True when `m` lies inside tensor bytes [bytes, bytes + n) (never for an empty view).
bool inside(const kernels::Matrix& m, const std::byte* bytes, size_t n) {
  return m.data != nullptr && m.data >= bytes && m.data < bytes + n;
}

// Whether the tensor's views may be rewritten as one grouped run of rows: views of the whole
// tensor (a dense matrix; a tied output and embedding), or views (experts of a 3-D tensor, gate and
// up halves) that each start on a group boundary and hold whole groups, so each view is a grouped
// matrix itself.
bool groupable(const std::vector<kernels::Matrix*>& users, const std::byte* bytes, size_t n) {
  const kernels::Matrix& first = *users.front();
  const size_t group_bytes = static_cast<size_t>(kernels::kGroupRows) * first.row_bytes;
  if (n % first.row_bytes != 0) return false;
  for (const kernels::Matrix* u : users) {
    const bool whole = u->data == bytes && static_cast<size_t>(u->rows) * u->row_bytes == n;
    const bool aligned = u->rows % kernels::kGroupRows == 0 &&
                         static_cast<size_t>(u->data - bytes) % group_bytes == 0;
    if (u->dtype != first.dtype || u->row_bytes != first.row_bytes || !(whole || aligned)) {
      return false;
    }
  }
  return true;
}

// The bytes of an n-byte tensor at `bytes` that its users view, as offsets into it: merged, so
// one range for a whole-tensor view (or experts covering the tensor), else one per run of
// adjacent views. For groupable() users each range starts on a group boundary and, unless it
// ends the tensor, holds whole groups, so rewriting each range on its own gives the views the
// bytes a whole-tensor rewrite would, and leaves the unviewed bytes (an expert shard's unread
// experts) untouched.
std::vector<gguf::ByteRange> viewed_ranges(const std::vector<kernels::Matrix*>& users,
                                           const std::byte* bytes, size_t n) {
  std::vector<gguf::ByteRange> out;
  for (const kernels::Matrix* u : users) {
    const auto offset = static_cast<uint64_t>(u->data - bytes);
    const uint64_t len = static_cast<uint64_t>(u->rows) * u->row_bytes;
    out.push_back({offset, std::min<uint64_t>(len, n - offset)});
  }
  return gguf::normalize_ranges(std::move(out));
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

// The matrices `file`'s tensor `info` backs (views that start inside its bytes: the tensor's
// own matrix, or the experts of a 3-D tensor).
template <typename M>
std::vector<M*> views_of(const gguf::GgufFile& file, const gguf::TensorInfo& info,
                         const std::vector<M*>& views) {
  const auto bytes = file.tensor_data(info);
  std::vector<M*> out;
  for (M* m : views) {
    if (inside(*m, bytes.data(), bytes.size())) out.push_back(m);
  }
  return out;
}

}  // namespace

Status mark_pregrouped(const gguf::GgufFile& file, Weights& w) {
  const gguf::Value* list = file.find(kGroupedTensorsKey);
  if (list == nullptr) return {};
  const auto version = file.get_int(kLayoutVersionKey);
  if (!version.ok() || *version != kGroupedLayoutVersion) {
    return Status::corrupt(file.path() + ": lists grouped tensors but " +
                           std::string(kLayoutVersionKey) + " is not " +
                           std::to_string(kGroupedLayoutVersion));
  }
  const gguf::Array* names = list->as_array();
  if (names == nullptr || (!names->items.empty() && names->type != gguf::ValueType::kString)) {
    return Status::corrupt(file.path() + ": " + std::string(kGroupedTensorsKey) +
                           " is not an array of strings");
  }
  std::vector<kernels::Matrix*> views = matrices(w);
  views.push_back(&w.token_embd);  // an untied embedding may be listed too
  for (const gguf::Value& v : names->items) {
    const std::string& name = *v.as_string();
    const gguf::TensorInfo* info = file.find_tensor(name);
    const std::vector<kernels::Matrix*> users =
        info ? views_of(file, *info, views) : std::vector<kernels::Matrix*>{};
    if (users.empty() || !kernels::grouped_layout_supports(info->dtype)) {
      return Status::corrupt(file.path() + ": grouped tensor '" + name +
                             "' is not a matrix of a type with a grouped layout");
    }
    for (kernels::Matrix* u : users) u->layout = kernels::WeightLayout::kGrouped16;
  }
  return {};
}

std::vector<std::string> grouped_tensor_names(const gguf::GgufFile& file, const Weights& w) {
  std::vector<const kernels::Matrix*> views = matrices(w);
  views.push_back(&w.token_embd);
  std::vector<std::string> out;
  for (const gguf::TensorInfo& info : file.tensors()) {
    for (const kernels::Matrix* m : views_of(file, info, views)) {
      if (m->layout == kernels::WeightLayout::kGrouped16) {
        out.push_back(info.name);
        break;
      }
    }
  }
  return out;
}

int group_weights(gguf::GgufFile& file, Weights& w, ThreadPool* pool) {
  const std::vector<bool> aliased = aliased_tensors(file);
  const std::vector<kernels::Matrix*> views = matrices(w);
  int rewritten = 0;
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const gguf::TensorInfo& info = file.tensors()[i];
    if (aliased[i] || !kernels::grouped_layout_preferred(info.dtype)) continue;
    const auto bytes = file.tensor_data(info);
    std::vector<kernels::Matrix*> users;
    for (kernels::Matrix* m : views) {
      if (inside(*m, bytes.data(), bytes.size()) && m->layout == kernels::WeightLayout::kRows) {
        users.push_back(m);
      }
    }
    if (users.empty() || !groupable(users, bytes.data(), bytes.size())) continue;
    const std::span<std::byte> out = file.mutable_tensor_data(info);
    if (out.empty()) return rewritten;  // mapped: nothing can be rewritten
    const kernels::Matrix& m = *users.front();
    for (const gguf::ByteRange& r : viewed_ranges(users, bytes.data(), bytes.size())) {
      const auto rows = static_cast<int64_t>(r.bytes / m.row_bytes);
      kernels::group_rows_in_place(m.dtype, rows, m.row_bytes, out.data() + r.offset, pool);
    }
    for (kernels::Matrix* u : users) u->layout = kernels::WeightLayout::kGrouped16;
    ++rewritten;
  }
  return rewritten;
}

}  // namespace keel::model
