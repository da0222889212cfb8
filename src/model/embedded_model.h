// The weight-bound benchmark fixture of `keel make-model --embed`: a small trained llama model
// (stories260K) embedded in a dense body of a real model's shape, so the file costs what the
// shape costs to read and compute while its text is the small model's. It is a benchmark fixture,
// not a model: it knows only what the small model knows.
//
// Construction (embed_layout.h places everything): the residual stream is the shape's width, but
// only the small model's dimensions are ever non-zero. The token embedding and the matrices that
// write into the residual (attention output, FFN down) hold the small model's weights at their
// slots and zeros elsewhere; every other matrix is full size, the small model's rows at their
// slots (zero-padded to a quantization block) and seeded random values everywhere else — what
// those rows compute is multiplied by zeros, so it costs its full read and changes nothing. The
// head size stays the small model's; RMSNorm weights × √(small/wide) and ε × small/wide keep each
// normalisation exact; the layers beyond the small model's depth are identity layers (random
// attention and FFN, zero output projections) interleaved with the real ones. The vocabulary and
// the tokenizer stay the small model's, so the LM head is smaller than the shape's. In F32 the
// fixture computes the small model's function up to rounding.
//
// Thread safety: write_embedded_model() uses the given pool; call from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/dtype.h"
#include "core/result.h"
#include "core/thread_pool.h"
#include "model/random_model.h"

namespace keel::model {

struct EmbedModelSpec {
  std::string embed_path;  // a dense llama GGUF (no biases, no RoPE scaling), e.g. stories260K
  ModelShape shape;        // the dense body's shape (its vocabulary size is not used)
  DType weight_type = DType::kF32;  // F32, F16, BF16, Q8_0, Q4_0 or Q4_K (norms stay F32)
  uint64_t seed = 42;               // of the random rows
  int64_t n_ctx = 0;                // context length written; 0 = the embedded model's
  std::string name;                 // general.name; "" = "keel <shape> <type> embedding <file>"
};

// Writes the fixture to `path` (atomically). `progress(done, total)` counts tensors. Errors name
// the embedded file: InvalidArgument for a non-llama, mixture-of-experts, biased or RoPE-scaled
// embed model and for a shape that cannot hold it (plan_embed_layout); the reader's errors for a
// missing or malformed file; InvalidArgument for a weight type make-model cannot write.
Status write_embedded_model(const EmbedModelSpec& spec, const std::string& path, ThreadPool& pool,
                            const std::function<void(size_t, size_t)>& progress = {});

}  // namespace keel::model
