// Batch: one flat forward-pass batch — tokens of one or more sequences, each token with its own
// position and each sequence with its own block table, so decode steps and (chunked) prefills
// share one pass. Plain data; validate_batch() checks it before the forward pass touches memory.
//
// Within one sequence tokens have increasing positions (in batch order): usually consecutive; a
// PIC link recomputes scattered positions. Every position below a token's that the batch does
// not compute must already hold valid K/V in the sequence's blocks (written by earlier passes,
// shared from the prefix cache, or linked from a chunk); the pass writes the K/V of its token at
// position p into block block_table[p / block_size], row p % block_size, then — layer by layer,
// after every token of the batch wrote its row — that token attends to [0, p].
// Thread safety: plain data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"

namespace keel::model {

class PageSelector;  // page_selector.h
class LoraAdapter;   // lora_adapter.h

// A block table entry whose page was released (sparse decode): never read or written. Allowed
// only for pages a sequence's attend_pages leaves out. Same value as kv::kNoBlock.
inline constexpr int32_t kReleasedBlock = -1;

// One sequence in a batch.
struct BatchSeq {
  std::vector<int32_t> block_table;  // KV block ids covering positions [0, ...) of this sequence
  // Sparse decode: the pages (indices into block_table, ascending) its tokens attend to instead
  // of every page up to their position. The last must be the page of every token's position
  // (the one being written); the others are full. Empty = dense.
  std::vector<int32_t> attend_pages;
  // Batch::selector is asked for this sequence's pages at Batch::select_layer (see
  // page_selector.h); layers before it attend attend_pages.
  bool select_pages = false;
  // The LoRA adapter its tokens run with (borrowed; alive until the pass returns); null = base.
  const LoraAdapter* lora = nullptr;
};

struct Batch {
  std::vector<int32_t> tokens;     // [n_tokens] token ids, in [0, n_vocab)
  std::vector<int32_t> positions;  // [n_tokens] position in its sequence, in [0, n_ctx)
  std::vector<int32_t> seq_index;  // [n_tokens] index into `seqs`
  std::vector<uint8_t> logits;     // [n_tokens] 1 = return logits for this token
  std::vector<BatchSeq> seqs;      // [n_seqs]
  // Sparse decode: asked at layer select_layer for the pages of each seq with select_pages
  // (borrowed; null = none).
  PageSelector* selector = nullptr;
  int64_t select_layer = 0;

  [[nodiscard]] size_t size() const { return tokens.size(); }
  [[nodiscard]] bool empty() const { return tokens.empty(); }

  // Appends a sequence; returns its index.
  int32_t add_seq(std::vector<int32_t> block_table) {
    seqs.push_back(BatchSeq{std::move(block_table)});
    return static_cast<int32_t>(seqs.size()) - 1;
  }
  void add(int32_t token, int32_t position, int32_t seq, bool want_logits) {
    tokens.push_back(token);
    positions.push_back(position);
    seq_index.push_back(seq);
    logits.push_back(want_logits ? 1 : 0);
  }
  // Removes the tokens, keeps the sequences.
  void clear_tokens() {
    tokens.clear();
    positions.clear();
    seq_index.clear();
    logits.clear();
  }
};

// What a batch is checked against.
struct BatchLimits {
  int64_t max_tokens = 0;  // tokens per batch (the Context's scratch)
  int64_t n_vocab = 0;     // token ids in [0, n_vocab)
  int64_t n_ctx = 0;       // positions in [0, n_ctx)
  int32_t block_size = 0;  // positions per KV block
  int32_t num_blocks = 0;  // block ids in [0, num_blocks)
};

// OK when the batch is well formed. InvalidArgument (the message names the batch token and
// sequence at fault): fields of different lengths, no tokens or more than max_tokens, a token id
// out of the vocabulary, a sequence index out of range, a negative position, positions of a
// sequence that do not increase, a block table too short for a position, a block id out of
// range (any entry covering [0, position], except a kReleasedBlock page that attend_pages leaves
// out), two tokens writing the same block row, attend_pages not ascending, out of the table, or
// not ending at a token's own page. OutOfRange: a
// position ≥ n_ctx.
Status validate_batch(const Batch& batch, const BatchLimits& limits);

}  // namespace keel::model
