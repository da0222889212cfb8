// KvLayout and KvStorage: the paged KV memory of a model. The storage is an array of blocks of
// `block_size` positions; a block is one contiguous byte range holding, for every layer, K rows
// then V rows, each [block_size][kv_dim] elements of `dtype` (f32; f16 rounded to nearest-even
// when written; or Q8_0, quantized when written: per row, kv_dim / 32 blocks of an f16 scale and
// 32 int8, GGML's block_q8_0, so kv_dim must be a multiple of 32 — a KV head narrower than 32
// shares its block's scale with its neighbours):
//   block b, layer l, K row p:  block(b) + ((l*2 + 0)*block_size + p) * row_bytes()
//   block b, layer l, V row p:  block(b) + ((l*2 + 1)*block_size + p) * row_bytes()
// The model only sees block ids (a sequence's block table) and this memory; which block belongs to
// which sequence is decided by the caller (the kv module's block pool).
//
// Thread safety: none; owned by the engine thread.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/buffer.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/result.h"
#include "kernels/kernels.h"
#include "model/hparams.h"

namespace keel::model {

struct KvLayout {
  int64_t n_layer = 0;
  int64_t kv_dim = 0;         // n_head_kv * head_dim
  int32_t block_size = 16;    // positions per block
  DType dtype = DType::kF32;  // kF32, kF16 or kQ8_0 (kv_dim a multiple of 32)

  // Bytes of one K or V row of kv_dim values (Q8_0: kv_dim / 32 blocks of 34 bytes).
  [[nodiscard]] size_t row_bytes() const {
    switch (dtype) {
      case DType::kF16:
        return static_cast<size_t>(kv_dim) * 2;
      case DType::kQ8_0:
        return static_cast<size_t>(kv_dim / 32) * 34;
      default:
        return static_cast<size_t>(kv_dim) * 4;
    }
  }
  // KV bytes one token occupies: K and V rows of every layer.
  [[nodiscard]] size_t bytes_per_token() const {
    return static_cast<size_t>(n_layer) * 2 * row_bytes();
  }
  [[nodiscard]] size_t block_bytes() const {
    return static_cast<size_t>(n_layer) * 2 * static_cast<size_t>(block_size) * row_bytes();
  }
  // Offsets within a block of layer `layer`'s first K row and first V row.
  [[nodiscard]] size_t k_offset(int64_t layer) const {
    return static_cast<size_t>(layer) * 2 * static_cast<size_t>(block_size) * row_bytes();
  }
  [[nodiscard]] size_t v_offset(int64_t layer) const {
    return k_offset(layer) + static_cast<size_t>(block_size) * row_bytes();
  }

  // InvalidArgument unless n_layer, kv_dim and block_size are ≥ 1, dtype is F32, F16 or Q8_0
  // (then kv_dim % 32 == 0) and a block's size fits in memory arithmetic.
  [[nodiscard]] Status validate() const;

  // The layout for a model's hyper-parameters: its n_layer and n_head_kv * head_dim.
  static KvLayout for_model(const HParams& hp, int32_t block_size, DType dtype);
};

class KvStorage {
 public:
  // num_blocks (≥ 1) zeroed blocks of `layout`. InvalidArgument for a bad layout or count,
  // ResourceExhausted when the size overflows or the memory cannot be allocated.
  static Result<KvStorage> create(const KvLayout& layout, int32_t num_blocks);
  // The largest number of blocks of `layout` that fits in `bytes` (≥ 0; 0 for a bad layout).
  static int32_t blocks_for_bytes(const KvLayout& layout, size_t bytes);

  KvStorage(KvStorage&&) noexcept = default;
  KvStorage& operator=(KvStorage&&) noexcept = default;

  [[nodiscard]] const KvLayout& layout() const { return layout_; }
  [[nodiscard]] int32_t num_blocks() const { return num_blocks_; }
  [[nodiscard]] size_t bytes() const { return buffer_.size(); }

  // The layout().block_bytes() bytes of block b, b in [0, num_blocks()).
  [[nodiscard]] std::byte* block(int32_t b) { return buffer_.data() + checked_offset(b); }
  [[nodiscard]] const std::byte* block(int32_t b) const {
    return buffer_.data() + checked_offset(b);
  }
  // Row `row` (in [0, block_size)) of layer `layer`'s K or V in block b: layout().row_bytes()
  // bytes of layout().dtype.
  [[nodiscard]] std::byte* k_row(int32_t b, int64_t layer, int32_t row) {
    return block(b) + layout_.k_offset(layer) + row_offset(row);
  }
  [[nodiscard]] const std::byte* k_row(int32_t b, int64_t layer, int32_t row) const {
    return block(b) + layout_.k_offset(layer) + row_offset(row);
  }
  [[nodiscard]] std::byte* v_row(int32_t b, int64_t layer, int32_t row) {
    return block(b) + layout_.v_offset(layer) + row_offset(row);
  }
  [[nodiscard]] const std::byte* v_row(int32_t b, int64_t layer, int32_t row) const {
    return block(b) + layout_.v_offset(layer) + row_offset(row);
  }
  // A row's kv_dim values as floats, and floats stored into a row (F16 rounded to nearest-even,
  // Q8_0 quantized as ggml's quantize_row_q8_0_ref: scale = max|x| / 127, q = round(x / scale)).
  void read_row(const std::byte* row, float* out) const {
    kernels::dequantize_row(layout_.dtype, row, out, layout_.kv_dim);
  }
  void write_row(const float* in, std::byte* row) const {
    kernels::quantize_row(layout_.dtype, in, row, layout_.kv_dim);
  }
  // Copies every layer's K and V rows of block src into block dst (copy-on-write support).
  void copy_block(int32_t src, int32_t dst);

  // The kernels' view of layer `layer` (for Ops::paged_attention).
  [[nodiscard]] kernels::PagedKv paged(int64_t layer) const;

 private:
  KvStorage() = default;
  [[nodiscard]] size_t row_offset(int32_t row) const {
    return static_cast<size_t>(row) * layout_.row_bytes();
  }
  [[nodiscard]] size_t checked_offset(int32_t b) const {
    KEEL_CHECK(b >= 0 && b < num_blocks_);
    return static_cast<size_t>(b) * layout_.block_bytes();
  }

  KvLayout layout_;
  int32_t num_blocks_ = 0;
  AlignedBuffer buffer_;
};

}  // namespace keel::model
