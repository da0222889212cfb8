// plan_embed_layout: shape checks, head and layer placement, block padding.
#include "model/embed_layout.h"

#include <algorithm>
#include <cmath>

namespace keel::model {
namespace {

int64_t round_up_to(int64_t n, int64_t block) { return (n + block - 1) / block * block; }

std::string dims_text(int64_t n_head, int64_t n_kv) {
  return std::to_string(n_head) + " query heads over " + std::to_string(n_kv) + " KV heads" +
         (n_kv > 0 ? " (groups of " + std::to_string(n_head / n_kv) + ")" : "");
}

// The body's dimensions at the embedded head size (checks the divisions).
Result<EmbedDims> wide_dims(const EmbedDims& real, const ModelShape& shape,
                            const std::string& embed_name) {
  const std::string sh = "shape '" + shape.name + "'";
  const int64_t hd = real.head_dim;
  const int64_t q_width = shape.n_head * shape.head_size();
  const int64_t kv_width = shape.n_head_kv * shape.head_size();
  if (shape.n_embd % hd != 0 || q_width % hd != 0 || kv_width % hd != 0) {
    return Status::invalid_argument(
        sh + " (width " + std::to_string(shape.n_embd) + ", K/V width " + std::to_string(kv_width) +
        ") is not a multiple of " + embed_name + "'s head size " + std::to_string(hd));
  }
  EmbedDims w{shape.n_embd, shape.n_layer, q_width / hd, kv_width / hd, hd, shape.n_ff};
  if (w.n_head_kv < real.n_head_kv || w.n_head % w.n_head_kv != 0 || w.group() < real.group()) {
    return Status::invalid_argument(
        "head-count mismatch: " + sh + " at head size " + std::to_string(hd) + " has " +
        dims_text(w.n_head, w.n_head_kv) + "; " + embed_name + "'s " +
        dims_text(real.n_head, real.n_head_kv) + " need at least " +
        std::to_string(real.n_head_kv) + " KV heads and whole groups of at least " +
        std::to_string(real.group()));
  }
  return w;
}

}  // namespace

int64_t EmbedLayout::wide_head(int64_t j) const {
  return wide.group() * (j / real.group()) + j % real.group();
}

int64_t EmbedLayout::real_head(int64_t wide_h) const {
  const int64_t g = wide_h / wide.group(), r = wide_h % wide.group();
  if (g >= real.n_head_kv || r >= real.group()) return -1;
  return g * real.group() + r;
}

Result<EmbedLayout> plan_embed_layout(const EmbedDims& real, const ModelShape& shape,
                                      DType weight_type, const std::string& embed_name) {
  const std::string sh = "shape '" + shape.name + "'";
  if (real.n_embd < 1 || real.n_layer < 1 || real.n_head < 1 || real.n_head_kv < 1 ||
      real.head_dim < 1 || real.n_ff < 1 || real.n_head % real.n_head_kv != 0) {
    return Status::invalid_argument(embed_name + " has inconsistent dimensions");
  }
  if (shape.n_expert > 0) {
    return Status::invalid_argument(sh + " is a mixture of experts; --embed needs a dense shape");
  }
  if (shape.n_embd < real.n_embd) {
    return Status::invalid_argument(sh + " is " + std::to_string(shape.n_embd) +
                                    " wide, narrower than " + embed_name + "'s " +
                                    std::to_string(real.n_embd));
  }
  if (shape.n_layer < real.n_layer) {
    return Status::invalid_argument(sh + " has " + std::to_string(shape.n_layer) +
                                    " layers, fewer than " + embed_name + "'s " +
                                    std::to_string(real.n_layer));
  }
  if (shape.n_ff < real.n_ff) {
    return Status::invalid_argument(sh + " has an FFN of " + std::to_string(shape.n_ff) +
                                    ", narrower than " + embed_name + "'s " +
                                    std::to_string(real.n_ff));
  }
  const int64_t type_block = dtype_info(weight_type).block_size;
  if (shape.n_embd % type_block != 0 || shape.n_ff % type_block != 0) {
    return Status::invalid_argument(sh + " does not fit weight type " +
                                    std::string(dtype_name(weight_type)) + " (" +
                                    std::to_string(type_block) + "-value blocks)");
  }
  EmbedLayout l;
  l.real = real;
  KEEL_ASSIGN_OR_RETURN(l.wide, wide_dims(real, shape, embed_name));
  l.block = std::max<int64_t>(32, type_block);
  // A body whose width is a multiple of the type's block holds whole padded rows; a plain-type
  // body narrower than the padding just ends the zeros at its edge.
  // Spread the real dimensions over the residual, but not for K-quants: their 32-value sub-blocks
  // carry an offset, so zeros beside real values are not exactly zero, and a token embedding row
  // would leak into the other dimensions. Packed, the real values fill whole sub-blocks.
  l.embd_stride = type_block > 32 ? 1 : shape.n_embd / real.n_embd;
  l.embd_pad = std::min(round_up_to(l.residual_slot(real.n_embd - 1) + 1, l.block), shape.n_embd);
  l.ff_pad = std::min(round_up_to(real.n_ff, l.block), shape.n_ff);
  const double ratio = static_cast<double>(real.n_embd) / static_cast<double>(shape.n_embd);
  l.norm_scale = static_cast<float>(std::sqrt(ratio));
  l.eps_scale = static_cast<float>(ratio);
  l.layer_source.assign(static_cast<size_t>(shape.n_layer), -1);
  for (int64_t i = 0; i < real.n_layer; ++i) {
    l.layer_source[static_cast<size_t>(i * shape.n_layer / real.n_layer)] = i;
  }
  return l;
}

}  // namespace keel::model
