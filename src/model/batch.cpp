// validate_batch: every rule of batch.h checked in one pass over the tokens (block table entries
// are checked once each, up to the highest position a sequence uses), then the written rows are
// sorted to find two tokens writing the same block row.
#include "model/batch.h"

#include <algorithm>
#include <string>
#include <tuple>

namespace keel::model {
namespace {

std::string token_prefix(size_t i) { return "batch token " + std::to_string(i) + ": "; }

}  // namespace

Status validate_batch(const Batch& batch, const BatchLimits& limits) {
  const size_t n = batch.tokens.size();
  if (batch.positions.size() != n || batch.seq_index.size() != n || batch.logits.size() != n) {
    return Status::invalid_argument("batch fields differ in length: tokens " + std::to_string(n) +
                                    ", positions " + std::to_string(batch.positions.size()) +
                                    ", seq_index " + std::to_string(batch.seq_index.size()) +
                                    ", logits " + std::to_string(batch.logits.size()));
  }
  if (n == 0 || static_cast<int64_t>(n) > limits.max_tokens) {
    return Status::invalid_argument("batch has " + std::to_string(n) +
                                    " tokens; this context takes 1 to " +
                                    std::to_string(limits.max_tokens));
  }
  const auto n_seqs = static_cast<int64_t>(batch.seqs.size());
  // Per sequence: the position its next token must have (-1 before its first token) and how many
  // leading block table entries are already checked.
  std::vector<int64_t> next(batch.seqs.size(), -1);
  std::vector<size_t> checked(batch.seqs.size(), 0);
  // (block, row, token) of every write.
  std::vector<std::tuple<int32_t, int32_t, size_t>> writes;
  writes.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t tok = batch.tokens[i], pos = batch.positions[i], seq = batch.seq_index[i];
    if (tok < 0 || tok >= limits.n_vocab) {
      return Status::invalid_argument(token_prefix(i) + "token id " + std::to_string(tok) +
                                      " is outside the vocabulary [0, " +
                                      std::to_string(limits.n_vocab) + ")");
    }
    if (seq < 0 || seq >= n_seqs) {
      return Status::invalid_argument(token_prefix(i) + "sequence index " + std::to_string(seq) +
                                      " is outside [0, " + std::to_string(n_seqs) + ")");
    }
    if (pos < 0) {
      return Status::invalid_argument(token_prefix(i) + "position " + std::to_string(pos) +
                                      " is negative");
    }
    if (pos >= limits.n_ctx) {
      return Status::out_of_range(token_prefix(i) + "position " + std::to_string(pos) +
                                  " is beyond the context size " + std::to_string(limits.n_ctx));
    }
    const auto s = static_cast<size_t>(seq);
    if (next[s] >= 0 && pos < next[s]) {
      return Status::invalid_argument(token_prefix(i) + "position " + std::to_string(pos) +
                                      " of sequence " + std::to_string(seq) +
                                      " does not follow position " + std::to_string(next[s] - 1) +
                                      " (positions within a sequence must increase)");
    }
    next[s] = int64_t{pos} + 1;
    const std::vector<int32_t>& table = batch.seqs[s].block_table;
    const auto entry = static_cast<size_t>(pos / limits.block_size);
    if (entry >= table.size()) {
      return Status::invalid_argument(
          token_prefix(i) + "position " + std::to_string(pos) + " of sequence " +
          std::to_string(seq) + " needs block table entry " + std::to_string(entry) +
          ", but the table has " + std::to_string(table.size()) + " entries (block size " +
          std::to_string(limits.block_size) + ")");
    }
    const std::vector<int32_t>& pages = batch.seqs[s].attend_pages;
    for (; checked[s] <= entry; ++checked[s]) {
      const int32_t id = table[checked[s]];
      if (id == kReleasedBlock && checked[s] != entry &&
          !std::binary_search(pages.begin(), pages.end(), static_cast<int32_t>(checked[s])) &&
          !pages.empty()) {
        continue;  // a released page this sequence does not attend
      }
      if (id < 0 || id >= limits.num_blocks) {
        return Status::invalid_argument(token_prefix(i) + "sequence " + std::to_string(seq) +
                                        "'s block table entry " + std::to_string(checked[s]) +
                                        " is block " + std::to_string(id) + ", outside [0, " +
                                        std::to_string(limits.num_blocks) + ")");
      }
    }
    writes.emplace_back(table[entry], pos % limits.block_size, i);
    if (!pages.empty() && static_cast<size_t>(pages.back()) != entry) {
      return Status::invalid_argument(token_prefix(i) + "sequence " + std::to_string(seq) +
                                      "'s attend_pages must end at its page " +
                                      std::to_string(entry));
    }
  }
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    const std::vector<int32_t>& pages = batch.seqs[s].attend_pages;
    for (size_t j = 0; j < pages.size(); ++j) {
      if (pages[j] < 0 || static_cast<size_t>(pages[j]) >= batch.seqs[s].block_table.size() ||
          (j > 0 && pages[j] <= pages[j - 1])) {
        return Status::invalid_argument("sequence " + std::to_string(s) +
                                        "'s attend_pages must be ascending indices into its "
                                        "block table");
      }
    }
  }
  std::sort(writes.begin(), writes.end());
  for (size_t w = 1; w < writes.size(); ++w) {
    const auto& [block, row, first] = writes[w - 1];
    if (block == std::get<0>(writes[w]) && row == std::get<1>(writes[w])) {
      return Status::invalid_argument("batch tokens " + std::to_string(first) + " and " +
                                      std::to_string(std::get<2>(writes[w])) +
                                      " write the same KV row (block " + std::to_string(block) +
                                      ", row " + std::to_string(row) + ")");
    }
  }
  return Status();
}

}  // namespace keel::model
