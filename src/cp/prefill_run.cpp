// A context-parallel prefill benchmark's member and its one-process baseline (see prefill_run.h).
#include "cp/prefill_run.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "core/index_cast.h"
#include "cp/sequence_plan.h"
#include "model/batch.h"
#include "model/context.h"
#include "model/cp_message.h"
#include "model/kv_storage.h"

namespace keel::cp {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Member 0's token, passed around the ring: every member returns it.
Result<int32_t> share_token(model::CpRing& ring, int32_t token) {
  if (ring.size() == 1) return token;
  if (ring.rank() == 0) {
    KEEL_TRY(ring.send_next(model::pack_tokens(std::span<const int32_t>(&token, 1))));
    return token;
  }
  KEEL_ASSIGN_OR_RETURN(const model::CpMessage msg, ring.recv_prev());
  KEEL_ASSIGN_OR_RETURN(const std::vector<int32_t> got, model::view_tokens(msg));
  if (got.size() != 1) return Status::corrupt("context-parallel ring: expected one token");
  if (ring.rank() + 1 < ring.size()) KEEL_TRY(ring.send_next(msg));
  return got[0];
}

Result<model::KvStorage> storage(const model::Model& m, const PrefillRun& run, int64_t positions) {
  const auto layout = model::KvLayout::for_model(m.hparams(), run.block_size, run.kv_type);
  KEEL_TRY(layout.validate());
  return model::KvStorage::create(layout, static_cast<int32_t>(positions / run.block_size + 2));
}

Status check_run(const model::Model& m, const PrefillRun& run) {
  if (run.tokens < 1 || run.decode < 0 || run.tokens + run.decode > m.n_ctx() || run.rounds < 1) {
    return Status::invalid_argument("cp-prefill: --tokens + --decode must be in [1, " +
                                    std::to_string(m.n_ctx()) + "] and --rounds ≥ 1");
  }
  return Status();
}

}  // namespace

std::vector<int32_t> prefill_prompt(const model::Model& model, const PrefillRun& run) {
  std::mt19937 rng(run.seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(model.hparams().n_vocab) - 1);
  std::vector<int32_t> out(sz(run.tokens));
  for (int32_t& t : out) t = dist(rng);
  return out;
}

Result<PrefillReport> run_prefill_member(const model::Model& model, kernels::Ops& ops,
                                         model::CpRing& ring, const PrefillRun& run) {
  KEEL_TRY(check_run(model, run));
  const std::vector<int32_t> prompt = prefill_prompt(model, run);
  SequencePlan plan(ring.size(), run.block_size);
  std::vector<model::CpStep> steps = plan.append(prompt);
  model::CpStep& mine = steps[sz(ring.rank())];
  const int64_t decode_share = (run.decode + ring.size() - 1) / ring.size();
  KEEL_ASSIGN_OR_RETURN(model::KvStorage kv,
                        storage(model, run, std::ssize(mine.shard) + decode_share));
  model::Context ctx(model, std::ssize(mine.tokens));
  PrefillReport report;
  std::vector<float> logits;
  for (int r = 0; r < run.rounds; ++r) {
    PrefillRound round;
    const model::ContextParallel cp{&ring, run.overlap, &round.stats};
    const auto t0 = Clock::now();
    KEEL_TRY(ctx.forward_cp(mine, kv, ops, cp, &logits));
    round.seconds = since(t0);
    report.rounds.push_back(round);
  }
  report.positions = std::ssize(mine.shard);
  const int64_t blocks = (report.positions + run.block_size - 1) / run.block_size;
  report.kv_bytes = blocks * static_cast<int64_t>(kv.layout().block_bytes());
  if (mine.want_logits) report.next_token = argmax(logits);
  if (run.decode == 0) return report;
  plan.commit(steps);
  KEEL_ASSIGN_OR_RETURN(int32_t token, share_token(ring, report.next_token));
  report.next_token = token;
  const auto t0 = Clock::now();
  for (int i = 0; i < run.decode; ++i) {
    report.generated.push_back(token);
    if (i + 1 == run.decode) break;
    std::vector<model::CpStep> next = plan.append(std::span<const int32_t>(&token, 1));
    model::CpStep& step = next[sz(ring.rank())];
    step.want_logits = true;  // every member samples the same token
    const model::ContextParallel cp{&ring, run.overlap, nullptr};
    KEEL_TRY(ctx.forward_cp(step, kv, ops, cp, &logits));
    plan.commit(next);
    token = argmax(logits);
  }
  report.decode_seconds = since(t0);
  return report;
}

Result<PrefillReport> run_prefill_alone(const model::Model& model, kernels::Ops& ops,
                                        const PrefillRun& run) {
  KEEL_TRY(check_run(model, run));
  const std::vector<int32_t> prompt = prefill_prompt(model, run);
  KEEL_ASSIGN_OR_RETURN(model::KvStorage kv, storage(model, run, run.tokens + run.decode));
  std::vector<int32_t> table;
  for (int32_t b = 0; b * run.block_size < run.tokens + run.decode; ++b) table.push_back(b);
  model::Batch batch;
  const int32_t seq = batch.add_seq(table);
  for (int32_t i = 0; i < run.tokens; ++i) batch.add(prompt[sz(i)], i, seq, i + 1 == run.tokens);
  model::Context ctx(model, run.tokens);
  PrefillReport report;
  std::vector<float> logits;
  for (int r = 0; r < run.rounds; ++r) {
    const auto t0 = Clock::now();
    KEEL_TRY(ctx.forward(batch, kv, ops, &logits));
    report.rounds.push_back({since(t0), {}});
  }
  report.positions = run.tokens;
  report.kv_bytes = (run.tokens + run.block_size - 1) / run.block_size *
                    static_cast<int64_t>(kv.layout().block_bytes());
  report.next_token = argmax(logits);
  const auto t0 = Clock::now();
  int32_t token = report.next_token;
  for (int i = 0; i < run.decode; ++i) {
    report.generated.push_back(token);
    if (i + 1 == run.decode) break;
    batch.clear_tokens();
    batch.add(token, run.tokens + i, seq, true);
    KEEL_TRY(ctx.forward(batch, kv, ops, &logits));
    token = argmax(logits);
  }
  report.decode_seconds = since(t0);
  return report;
}

}  // namespace keel::cp
