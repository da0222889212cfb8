// A context-parallel prefill as a benchmark runs it (`keel cp-prefill`): one member of a group of
// processes — or, with one member, one process alone through Context::forward — prefills the same
// seeded random prompt, `rounds` times, each into a fresh sequence, and reports its times. Every
// member builds the same SequencePlan and runs its own step (model/context_parallel.h); member 0's
// last-token argmax names the result, so runs can be compared with one process. With `decode`,
// member 0 passes that token around the ring and every member then runs the same greedy decode
// steps (each computes the logits: the merged attention is the same bits on every member).
//
// Thread safety: one caller.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "kernels/kernels.h"
#include "model/context_parallel.h"
#include "model/model.h"

namespace keel::cp {

struct PrefillRun {
  int32_t tokens = 8192;  // prompt length
  uint32_t seed = 1;      // the prompt's tokens: uniform over the vocabulary
  DType kv_type = DType::kF16;
  int32_t block_size = 16;
  bool overlap = true;
  int rounds = 1;
  int decode = 0;  // greedy tokens generated after the last round (replicated decode steps)
};

struct PrefillRound {
  double seconds = 0;
  model::CpStats stats;  // this member's (zero alone)
};

struct PrefillReport {
  std::vector<PrefillRound> rounds;
  int64_t positions = 0;           // positions this member holds
  int64_t kv_bytes = 0;            // their K/V bytes (whole blocks)
  int32_t next_token = -1;         // argmax of the last token's logits (member 0, or alone)
  std::vector<int32_t> generated;  // run.decode greedy tokens, next_token first
  double decode_seconds = 0;       // their steps' time
};

// The prompt of `run` for `model` (the same on every member).
std::vector<int32_t> prefill_prompt(const model::Model& model, const PrefillRun& run);

// One member over `ring` (every member calls it with the same run).
Result<PrefillReport> run_prefill_member(const model::Model& model, kernels::Ops& ops,
                                         model::CpRing& ring, const PrefillRun& run);
// One process without context parallelism: the prompt as one batch through Context::forward.
Result<PrefillReport> run_prefill_alone(const model::Model& model, kernels::Ops& ops,
                                        const PrefillRun& run);

}  // namespace keel::cp
