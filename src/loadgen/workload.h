// Workload generation for `keel bench-serve`: the prompts of one benchmark run, built from a
// seeded Rng so that the same configuration and seed give byte-identical requests.
//   random         prompts of input_len tokens (or words) each, lengths spread by range_ratio
//   shared-prefix  num_groups system-prompt-like prefixes of prefix_len; every prompt is one
//                  group's prefix followed by a suffix of suffix_len unique to it
//   rag            a pool of rag_num_docs documents of rag_doc_len words; every prompt takes
//                  rag_docs_per_request distinct documents in random order plus a question of
//                  rag_question_len words (text only; sent to chat endpoints as a system message
//                  whose parts — one per document — are marked position-independent)
//   long-decode    random prompts (short, typically) with long outputs: the report adds per-token
//                  latency and the server's KV usage by output length (length_profile.h)
// Token-id prompts draw ids uniformly from [min_token_id, vocab_size); text prompts draw words
// from a fixed list of common English words (each close to one token in most vocabularies).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/status.h"

namespace keel::loadgen {

enum class DatasetKind { kRandom, kSharedPrefix, kRag, kLongDecode };
enum class PromptFormat { kTokenIds, kText };

// Stable lower-case names ("random", "shared-prefix", "rag", "long-decode"; "token-ids", "text").
std::string_view dataset_kind_name(DatasetKind kind);
std::string_view prompt_format_name(PromptFormat format);

struct WorkloadConfig {
  DatasetKind dataset = DatasetKind::kRandom;
  PromptFormat format = PromptFormat::kTokenIds;
  int64_t num_prompts = 1000;  // requests in the run
  int64_t input_len = 512;     // random: prompt length in tokens (token ids) or words (text)
  int64_t output_len = 128;    // max_tokens of a request, before range_ratio
  // Lengths are drawn uniformly from [floor(len*(1-r)), floor(len*(1+r))], at least 1; applies to
  // input_len and output_len (random) or suffix_len and output_len (shared-prefix). 0 <= r < 1.
  double range_ratio = 0.0;
  int64_t num_groups = 10;    // shared-prefix: distinct prefixes; prompts are spread evenly
  int64_t prefix_len = 256;   // shared-prefix: tokens (words) of each group's prefix
  int64_t suffix_len = 256;   // shared-prefix: tokens (words) after the prefix, unique per prompt
  int64_t rag_num_docs = 16;  // rag: documents in the pool (D)
  int64_t rag_docs_per_request = 4;  // rag: documents per prompt (M ≤ D)
  int64_t rag_doc_len = 256;         // rag: words per document
  int64_t rag_question_len = 16;     // rag: words of the question after the documents
  int64_t vocab_size = 32000;        // token ids are drawn from [min_token_id, vocab_size)
  int64_t min_token_id = 3;          // skips the usual <unk>, <s>, </s> ids at the bottom
  uint64_t seed = 0;

  // Ok, or invalid_argument naming the first field out of range.
  [[nodiscard]] Status validate() const;
};

// One request's prompt and length budget.
struct PromptSpec {
  std::vector<int32_t> token_ids;      // token-id prompts: the prompt [prompt_len]; else empty
  std::string text;                    // text prompts: prompt_len words joined by single spaces
  int64_t prompt_len = 0;              // tokens (token ids) or words (text), as generated
  int64_t output_len = 0;              // max_tokens for this request
  int64_t group_idx = -1;              // shared-prefix: the prefix group; -1 for random
  std::vector<std::string> documents;  // rag: the documents, in order; `text` is the question
  std::vector<int64_t> doc_ids;        // rag: their indices in the pool
};

// The num_prompts prompts of a run, in send order. Errors only when config.validate() fails.
Result<std::vector<PromptSpec>> generate_workload(const WorkloadConfig& config);

// The word list text prompts are drawn from (exposed for tests).
std::span<const std::string_view> prompt_words();

}  // namespace keel::loadgen
