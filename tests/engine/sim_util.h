// Test doubles for the scheduler: FakeKvModel, a stand-in for the model whose "KV" rows record
// the token written at each (block, row) and whose next token is a hash of the tokens it reads
// back through a seq's block table — so a wrong block table, prefix hit, copy or placeholder
// changes the output (demoted and promoted blocks carry those rows); reference_output(), the same
// generation with no scheduler at all; and SimEngine, an engine loop (plain or schedule-ahead)
// driving a Scheduler to completion.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <vector>

#include "engine/scheduler.h"

namespace keel::engine::testing {

class FakeKvModel {
 public:
  FakeKvModel(int32_t num_blocks, int32_t block_size, int32_t vocab);
  // Performs the plan's copies, writes every seq's tokens into its rows, then samples for each
  // seq with samples = true from the rows [0, last position] it reads back.
  std::vector<SeqResult> execute(const StepPlan& plan);
  // With tiers, execute() first demotes the plan's evicted blocks (their rows as payload bytes,
  // block_size × int32) to `tiers`, then copies, then writes the promotions' payloads back.
  void set_tiers(kv::KvTiers* tiers) { tiers_ = tiers; }
  [[nodiscard]] size_t payload_bytes() const { return static_cast<size_t>(block_size_) * 4; }
  // Rows read that were never written, and placeholder tokens executed (both must stay 0).
  [[nodiscard]] int64_t num_errors() const { return num_errors_; }
  [[nodiscard]] int32_t vocab() const { return vocab_; }
  [[nodiscard]] int64_t num_copies() const { return num_copies_; }  // block copies performed

 private:
  int32_t block_size_;
  int32_t vocab_;
  std::vector<int32_t> rows_;  // [num_blocks * block_size]; kUnwritten until written
  int64_t num_errors_ = 0;
  int64_t num_copies_ = 0;
  kv::KvTiers* tiers_ = nullptr;
};

// The deterministic "model": next token after `context`, in [0, vocab).
int32_t next_token(std::span<const int32_t> context, int32_t vocab);

// Generated tokens with unlimited memory: stop after max_tokens or on `eos` (included).
std::vector<int32_t> reference_output(std::vector<int32_t> prompt, int32_t max_tokens,
                                      int32_t vocab, int32_t eos);

// Structural checks every plan from schedule() must pass: budget, max_num_seqs, one seq per
// request, token counts, block tables covering the computed positions.
// Runs `sched` (every sampled token 7) until no request is left or `max_steps`, finishing each of
// `states` once it generated max_tokens; returns the keys in the order their seqs first ran.
std::vector<RequestKey> run_in_order(Scheduler& sched,
                                     const std::vector<std::unique_ptr<RequestState>>& states,
                                     int max_steps);

void expect_valid_plan(const StepPlan& plan, const SchedulerConfig& config, int32_t block_size);

struct SimRequest {
  RequestKey key = 0;
  std::vector<int32_t> prompt;
  int32_t max_tokens = 1;
  kv::BlockHash extra_key;
};

// Drives a Scheduler and a FakeKvModel like the engine would. Finish rule: `eos` sampled or
// max_tokens generated → Scheduler::finish().
class SimEngine {
 public:
  SimEngine(Scheduler* scheduler, FakeKvModel* model, int32_t eos, bool schedule_ahead);
  void submit(const SimRequest& request);
  void abort(RequestKey key);
  // Runs one engine iteration (schedule → execute → update; ahead: the next plan is made
  // before the update). Returns false when there is nothing left to do.
  bool step();
  // Runs until every request finished; fails the test after max_steps.
  void run(int max_steps);
  // Called right before every schedule().
  std::function<void()> before_schedule;
  // Called with every plan right after schedule() (before any update).
  std::function<void(const StepPlan&)> on_plan;
  // Called after every update().
  std::function<void()> on_update;

  const std::map<RequestKey, std::vector<int32_t>>& outputs() const { return outputs_; }
  const std::set<RequestKey>& active() const { return active_; }
  int64_t num_steps() const { return num_steps_; }

 private:
  void deliver(std::span<const SeqResult> results);

  Scheduler* scheduler_;
  FakeKvModel* model_;
  int32_t eos_;
  bool ahead_;
  std::map<RequestKey, int32_t> max_tokens_;
  std::map<RequestKey, std::vector<int32_t>> outputs_;  // emitted tokens per request
  std::set<RequestKey> active_;                         // submitted, not finished or aborted
  std::set<RequestKey> finished_;                       // finished by the finish rule
  bool have_pending_ = false;
  StepPlan pending_;  // ahead mode: the plan made but not executed yet
  int64_t num_steps_ = 0;
};

}  // namespace keel::engine::testing
