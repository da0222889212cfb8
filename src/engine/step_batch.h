// Batch building: how a StepPlan's seqs and probe become the rows of a StepInput (the batch the
// StepExecutor runs) — each seq's tokens at their positions with its block table, and a logits
// row for every row it samples: its last known token's and each draft's of a verification. The
// engine adds what only it knows per seq (the sampler, sparse binding, early exit).
// Thread safety: pure functions over their arguments.
#pragma once

#include <cstdint>

#include "engine/step_executor.h"
#include "engine/step_plan.h"

namespace keel::engine {

// Appends `s` (resolved: no placeholder token left) to in->batch with the LoRA adapter its rows
// use (null = the base model), and an empty sparse binding beside it; returns its seq index.
int32_t add_scheduled_seq(StepInput* in, const ScheduledSeq& s, const model::LoraAdapter* lora);

// Puts CacheBlend's probe `p` in in->probe (its rows want no logits) under its request's key.
void add_probe(StepInput* in, const ProbePlan& p);

}  // namespace keel::engine
