// Engine: sparse decode around each step — binding a request's SparseSequence into the batch
// before the step and giving the pages it released back to the pool after it (sparse_decode.h).
#include <algorithm>

#include "engine/engine.h"

namespace keel::engine {

// The engine's block tables (kv) become batch tables (model) as they are: one hole value.
static_assert(kv::kNoBlock == model::kReleasedBlock);

void Engine::bind_sparse(const ScheduledSeq& s, EngineRequest& a, model::BatchSeq* seq,
                         SparseSelector::Binding* binding) {
  SparseSequence& st = *a.sparse;
  const int32_t epoch = a.sched.num_preemptions;
  *binding = {&st, epoch};
  const int32_t pos = s.start_pos + s.num_tokens - 1;
  if (s.num_tokens != 1 || !s.positions.empty() || pos < st.num_prompt_tokens) return;
  if (st.epoch == epoch) {
    st.prepare_decode(seq, pos, config_.block_size);
  } else {
    seq->select_pages = true;  // preempted since: the selector starts the summaries over
  }
}

void Engine::release_sparse_pages(const StepPlan& plan) {
  for (const ScheduledSeq& s : plan.seqs) {
    const auto it = active_.find(s.key);
    if (it == active_.end() || it->second.sparse == nullptr) continue;
    SparseSequence& st = *it->second.sparse;
    st.max_pages_held = std::max(st.max_pages_held, kv_.num_held_blocks(s.key));
    counters_.sparse_max_pages_held =
        std::max<int64_t>(counters_.sparse_max_pages_held, st.max_pages_held);
    if (st.pending.empty()) continue;
    const EngineRequest& a = it->second;
    if (!a.finished && a.sched.num_preemptions == st.epoch) {  // not preempted since: still valid
      scheduler_.release_pages(s.key, st.pending);
      counters_.sparse_pages_released += static_cast<int64_t>(st.pending.size());
    }
    st.pending.clear();
  }
}

}  // namespace keel::engine
