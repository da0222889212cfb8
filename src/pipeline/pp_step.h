// PpStep: what stage 0 of a pipeline-parallel engine sends a later stage for one step, and its one
// codec (versioned, total). The batch travels without its borrowed pointers (LoRA adapters, page
// selector — features a pipeline refuses): tokens, positions, sequence indices, logits flags and
// each sequence's block table (stage 0's block ids). Layout, all integers little-endian:
//   magic u32 "KPPS" | version u16 | reserved u16 (0) |
//   n_copies u32 | n_copies × (src i32, dst i32) |
//   n_tokens u32 | tokens i32[n] | positions i32[n] | seq_index i32[n] | logits u8[n] |
//   n_seqs u32 | n_seqs × (n_blocks u32, block ids i32[n_blocks]) |
//   n_residual u32 | residual f32[n_residual]
// Decoding checks sizes and the limits below only; whether the batch is well formed for a model
// is model::validate_batch's business (the stage runs it before touching memory).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"
#include "engine/pipeline_tail.h"
#include "model/batch.h"

namespace keel::pipeline {

inline constexpr uint32_t kPpStepMagic = 0x5350504B;  // "KPPS" little-endian
inline constexpr uint16_t kPpStepVersion = 1;
// Decoder limits (far above any engine's batch: max_batched_tokens is at most 64K).
inline constexpr uint32_t kPpMaxTokens = 1u << 20;
inline constexpr uint32_t kPpMaxSeqs = 1u << 16;
inline constexpr uint32_t kPpMaxBlocksPerSeq = 1u << 20;
inline constexpr uint32_t kPpMaxCopies = 1u << 20;
inline constexpr uint32_t kPpMaxResidualFloats = 1u << 28;

struct PpStep {
  std::vector<engine::BlockCopy> block_copies;  // applied in order before the batch
  model::Batch batch;                           // tokens, positions, seq_index, logits, seqs
  std::vector<float> residual;                  // [batch.size()][n_embd]
};

// Encodes a step from the executor's view of it (batch pointer may be to an empty batch).
[[nodiscard]] std::vector<uint8_t> encode_pp_step(const engine::PipelineStep& step);
// Bytes → step, or InvalidArgument naming what is wrong (magic, version, a count over its
// limit, truncated or trailing bytes).
[[nodiscard]] Result<PpStep> decode_pp_step(std::span<const uint8_t> bytes);

// The reply's logits rows as bytes (f32 little-endian) and back (InvalidArgument when the length
// is not a multiple of 4).
[[nodiscard]] std::vector<uint8_t> encode_floats(std::span<const float> values);
[[nodiscard]] Result<std::vector<float>> decode_floats(std::span<const uint8_t> bytes);

}  // namespace keel::pipeline
