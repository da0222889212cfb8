// Batch: one flat forward-pass batch — tokens of one or more sequences, each with its own
// position and KV-cache slot, so decode steps and (chunked) prefills share one pass. Plain data;
// Context::forward validates it (sizes, ranges, contiguity) before touching the cache.
//
// Within a slot, the first token's position is at most the slot's current length (a smaller one
// rewrites from there on, dropping later positions) and the slot's next tokens follow at
// consecutive positions. A token attends to positions [0, pos] of its slot, including earlier
// tokens of the same slot in the same batch.
// Thread safety: plain data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace keel::model {

struct Batch {
  std::vector<int32_t> tokens;     // [n_tokens] token ids, in [0, n_vocab)
  std::vector<int32_t> positions;  // [n_tokens] position in its sequence, in [0, n_ctx)
  std::vector<int32_t> seq_slots;  // [n_tokens] KV-cache slot, in [0, max_seqs)
  std::vector<uint8_t> logits;     // [n_tokens] 1 = return logits for this token

  [[nodiscard]] size_t size() const { return tokens.size(); }
  [[nodiscard]] bool empty() const { return tokens.empty(); }

  void add(int32_t token, int32_t position, int32_t seq_slot, bool want_logits) {
    tokens.push_back(token);
    positions.push_back(position);
    seq_slots.push_back(seq_slot);
    logits.push_back(want_logits ? 1 : 0);
  }
  void clear() {
    tokens.clear();
    positions.clear();
    seq_slots.clear();
    logits.clear();
  }
};

}  // namespace keel::model
