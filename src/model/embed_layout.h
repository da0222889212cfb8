// EmbedLayout: where a small llama model's weights sit inside a wider, deeper dense body (the
// benchmark fixture of `keel make-model --embed`, embedded_model.h). Pure arithmetic over the two
// shapes; no I/O.
//
// Invariants of a planned layout (plan_embed_layout checks the shapes): the body keeps the small
// model's head size, so it has n_embd / head_dim query heads; the small model's residual
// dimension i is the body's residual_slot(i) = i · embd_stride, spread evenly so that each of a
// TinyLlama-wide residual's 32-value blocks holds one (a Q4_0 or Q8_0 block of a matrix that reads
// the residual then holds one real value and zeros: its scale is that value's own, and the small
// model's weights lose almost nothing to quantization there); its KV head g is the body's KV head
// g, and its query head j is the body's wide_head(j) = group·⌊j / real_group⌋ + j mod real_group
// (so each real query head reads its own real KV head); its layer i is the body's layer ⌊i·n_layer
// / real.n_layer⌋ (interleaved with identity layers); the real parts of rows and of the FFN are
// padded with zeros to `block` values, so no quantization block holds both real and random values.
// Thread safety: plain data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "model/random_model.h"

namespace keel::model {

// The dimensions of the embedded (small) model.
struct EmbedDims {
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t n_ff = 0;

  [[nodiscard]] int64_t group() const { return n_head / n_head_kv; }  // query heads per KV head
};

struct EmbedLayout {
  EmbedDims real;  // the embedded model
  EmbedDims wide;  // the body: the shape's width, depth and FFN at real.head_dim
  // Values per quantization block the padding respects: the weight type's block, at least 32 (so
  // Q8_0 activations of F16/F32 bodies are covered too).
  int64_t block = 32;
  // Real residual dimension i is the body's i · embd_stride; a real row that reads the residual
  // is zero in [0, embd_pad) but at those slots (embd_pad: the end of the block of the last
  // slot), random after. Real FFN rows are [0, real.n_ff); rows [real.n_ff, ff_pad) are zero.
  int64_t embd_stride = 1;
  int64_t embd_pad = 0;
  int64_t ff_pad = 0;
  // RMSNorm over the wide residual equals the small model's when the norm weights are multiplied
  // by norm_scale = √(real.n_embd / wide.n_embd) and ε by eps_scale = real.n_embd / wide.n_embd.
  float norm_scale = 1.0f;
  float eps_scale = 1.0f;
  // For each body layer, the embedded layer it holds; -1 = an identity layer (zero output
  // projections: its attention and FFN are computed and discarded).
  std::vector<int64_t> layer_source;

  // The body's residual dimension that holds embedded dimension i.
  [[nodiscard]] int64_t residual_slot(int64_t i) const { return i * embd_stride; }
  // The embedded dimension a body residual dimension holds; -1 when it holds none.
  [[nodiscard]] int64_t real_dim(int64_t wide_i) const {
    return wide_i % embd_stride == 0 && wide_i / embd_stride < real.n_embd ? wide_i / embd_stride
                                                                           : -1;
  }
  // The body's query head that holds embedded query head j.
  [[nodiscard]] int64_t wide_head(int64_t j) const;
  // The embedded query head a body query head holds; -1 when it holds none.
  [[nodiscard]] int64_t real_head(int64_t wide_h) const;
};

// Checks that `shape` can hold a model of dimensions `real` at `weight_type` and plans the layout.
// InvalidArgument naming `embed_name` and the shape for: a mixture-of-experts shape, a shape
// narrower or shallower than the embedded model, a width or K/V width that is not a multiple of
// the head size, a head-count mismatch (fewer KV heads or smaller query groups than the embedded
// model), an FFN narrower than the embedded one, or a shape that does not fit the weight type's
// blocks.
Result<EmbedLayout> plan_embed_layout(const EmbedDims& real, const ModelShape& shape,
                                      DType weight_type, const std::string& embed_name);

}  // namespace keel::model
