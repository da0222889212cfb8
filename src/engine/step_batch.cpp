// Batch building (step_batch.h).
#include "engine/step_batch.h"

#include "core/check.h"

namespace keel::engine {

int32_t add_scheduled_seq(StepInput* in, const ScheduledSeq& s, const model::LoraAdapter* lora) {
  const auto seq_index = static_cast<int32_t>(in->batch.seqs.size());
  in->batch.seqs.push_back(model::BatchSeq{.block_table = s.block_table, .lora = lora});
  in->sparse.emplace_back();
  KEEL_CHECK(static_cast<int32_t>(s.tokens.size()) == s.num_tokens);
  for (int32_t i = 0; i < s.num_tokens; ++i) {
    KEEL_CHECK_MSG(s.tokens[static_cast<size_t>(i)] != kPlaceholderToken,
                   "a plan was launched before resolve_plan()");
    in->batch.tokens.push_back(s.tokens[static_cast<size_t>(i)]);
    in->batch.positions.push_back(s.position(i));
    in->batch.seq_index.push_back(seq_index);
    // A verification's rows: the last known token's and every draft's.
    in->batch.logits.push_back(s.samples && i + 1 + s.num_drafts >= s.num_tokens ? 1 : 0);
  }
  return seq_index;
}

void add_probe(StepInput* in, const ProbePlan& p) {
  const int32_t seq = in->probe.add_seq(p.block_table);
  for (size_t i = 0; i < p.tokens.size(); ++i) {
    in->probe.add(p.tokens[i], p.start + static_cast<int32_t>(i), seq, false);
  }
  in->probe_key = p.key;
}

}  // namespace keel::engine
