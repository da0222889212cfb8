// KvCache: the keys and values of every layer for a few sequence slots, f32, contiguous per slot:
// K and V each laid out [layer][slot][pos][n_head_kv * head_dim]. Each slot also records how many
// leading positions hold valid entries (its length). This is the only place that knows the
// layout; a paged cache with block tables replaces it later.
//
// Invariants: 0 ≤ length(slot) ≤ n_ctx; positions [0, length) of a slot were written by a
// forward pass since the last clear()/truncate().
// Thread safety: none; owned by one engine thread.
#pragma once

#include <cstdint>
#include <vector>

#include "core/buffer.h"
#include "core/check.h"
#include "core/result.h"

namespace keel::model {

class Model;

class KvCache {
 public:
  // A cache of n_slots sequences of up to n_ctx positions of `row_width` floats per layer.
  // ResourceExhausted when the memory cannot be allocated.
  static Result<KvCache> create(int64_t n_layer, int32_t n_slots, int64_t n_ctx, int64_t row_width);
  // Sized for `model`: its n_layer, max_seqs(), n_ctx() and n_head_kv * head_dim.
  static Result<KvCache> for_model(const Model& model);

  KvCache(KvCache&&) noexcept = default;
  KvCache& operator=(KvCache&&) noexcept = default;

  [[nodiscard]] int64_t n_layer() const { return n_layer_; }
  [[nodiscard]] int32_t n_slots() const { return n_slots_; }
  [[nodiscard]] int64_t n_ctx() const { return n_ctx_; }
  [[nodiscard]] int64_t row_width() const { return row_width_; }
  [[nodiscard]] size_t bytes() const { return k_.size() + v_.size(); }

  // Valid leading positions of `slot`.
  [[nodiscard]] int64_t length(int32_t slot) const { return lengths_[checked_slot(slot)]; }
  // Forgets every position of `slot` (it may start a new sequence).
  void clear(int32_t slot) { lengths_[checked_slot(slot)] = 0; }
  // Keeps only the first `length` positions of `slot` (no-op if it holds fewer).
  void truncate(int32_t slot, int64_t length);
  // Records that positions [0, length) of `slot` are valid (called by the forward pass).
  void set_length(int32_t slot, int64_t length);

  // Row of `pos` in `slot` at `layer`; rows of consecutive positions are row_width() apart.
  [[nodiscard]] float* k(int64_t layer, int32_t slot, int64_t pos) {
    return row(k_, layer, slot, pos);
  }
  [[nodiscard]] float* v(int64_t layer, int32_t slot, int64_t pos) {
    return row(v_, layer, slot, pos);
  }

 private:
  KvCache() = default;
  [[nodiscard]] size_t checked_slot(int32_t slot) const {
    KEEL_CHECK(slot >= 0 && slot < n_slots_);
    return static_cast<size_t>(slot);
  }
  float* row(AlignedBuffer& buf, int64_t layer, int32_t slot, int64_t pos) {
    KEEL_DCHECK(layer >= 0 && layer < n_layer_ && pos >= 0 && pos < n_ctx_);
    const int64_t index =
        ((layer * n_slots_ + static_cast<int64_t>(checked_slot(slot))) * n_ctx_ + pos) * row_width_;
    return reinterpret_cast<float*>(buf.data()) + index;
  }

  int64_t n_layer_ = 0;
  int32_t n_slots_ = 0;
  int64_t n_ctx_ = 0;
  int64_t row_width_ = 0;
  AlignedBuffer k_;
  AlignedBuffer v_;
  std::vector<int64_t> lengths_;  // [n_slots]
};

}  // namespace keel::model
