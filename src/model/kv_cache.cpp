// KvCache allocation (overflow-checked) and slot bookkeeping.
#include "model/kv_cache.h"

#include <limits>
#include <string>

#include "model/model.h"

namespace keel::model {

Result<KvCache> KvCache::create(int64_t n_layer, int32_t n_slots, int64_t n_ctx,
                                int64_t row_width) {
  if (n_layer < 1 || n_slots < 1 || n_ctx < 1 || row_width < 1) {
    return Status::invalid_argument("KV cache dimensions must be positive: n_layer " +
                                    std::to_string(n_layer) + ", n_slots " +
                                    std::to_string(n_slots) + ", n_ctx " + std::to_string(n_ctx) +
                                    ", row_width " + std::to_string(row_width));
  }
  // floats per tensor (K or V); each factor is positive, so dividing detects overflow.
  const uint64_t limit = std::numeric_limits<uint64_t>::max() / sizeof(float);
  uint64_t floats = 1;
  for (int64_t f : {n_layer, static_cast<int64_t>(n_slots), n_ctx, row_width}) {
    const auto u = static_cast<uint64_t>(f);
    if (floats > limit / u) {
      return Status::resource_exhausted("KV cache size overflows: n_layer " +
                                        std::to_string(n_layer) + " x n_slots " +
                                        std::to_string(n_slots) + " x n_ctx " +
                                        std::to_string(n_ctx) + " x " + std::to_string(row_width));
    }
    floats *= u;
  }
  const size_t bytes = static_cast<size_t>(floats * sizeof(float));
  KvCache c;
  c.n_layer_ = n_layer;
  c.n_slots_ = n_slots;
  c.n_ctx_ = n_ctx;
  c.row_width_ = row_width;
  auto k = AlignedBuffer::allocate(bytes);
  auto v = k.ok() ? AlignedBuffer::allocate(bytes) : Result<AlignedBuffer>(k.error());
  if (!v.ok()) {
    return Status::resource_exhausted("cannot allocate the KV cache (2 x " + std::to_string(bytes) +
                                      " bytes for " + std::to_string(n_slots) + " slots of " +
                                      std::to_string(n_ctx) +
                                      " positions): " + v.error().message());
  }
  c.k_ = std::move(*k);
  c.v_ = std::move(*v);
  c.lengths_.assign(static_cast<size_t>(n_slots), 0);
  return c;
}

Result<KvCache> KvCache::for_model(const Model& model) {
  const HParams& hp = model.hparams();
  return create(hp.n_layer, model.max_seqs(), model.n_ctx(), hp.kv_dim());
}

void KvCache::truncate(int32_t slot, int64_t length) {
  KEEL_CHECK(length >= 0);
  int64_t& len = lengths_[checked_slot(slot)];
  if (length < len) len = length;
}

void KvCache::set_length(int32_t slot, int64_t length) {
  KEEL_CHECK(length >= 0 && length <= n_ctx_);
  lengths_[checked_slot(slot)] = length;
}

}  // namespace keel::model
