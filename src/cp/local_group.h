// LocalGroup: a context-parallel group whose N members are threads of this process, each with its
// own thread pool, kernels, Context and KV storage (its shard of the sequence), sharing one Model's
// weights — one sequence, computed by the members together (model/context_parallel.h): prompts as
// ring steps over zig-zag chunks (cp_plan.h), decode tokens as replicated steps stored by the
// member holding the fewest positions. The tests' and benchmarks' group: it shows a CP group's
// arithmetic and balance without processes; members in processes (member_run.h) run the same
// plan (sequence_plan.h) and Context call.
//
// Thread safety: one caller; each step runs the members on their own threads and returns when
// all have finished. A failed step closes the ring and leaves the group unusable
// (FailedPrecondition after).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "cp/sequence_plan.h"
#include "kernels/kernels.h"
#include "model/context_parallel.h"
#include "model/model.h"

namespace keel::cp {

struct GroupOptions {
  int n_members = 2;
  int threads_per_member = 1;
  kernels::Isa isa = kernels::Isa::kScalar;
  int32_t max_positions = 0;    // the sequence's length limit (> 0, ≤ the model's context)
  int64_t max_step_tokens = 0;  // a member's tokens per step (0: max_positions)
  DType kv_type = DType::kF16;
  int32_t block_size = 16;
  bool overlap = true;  // ring steps compute while the next shard is in flight
};

struct MemberReport {
  int64_t positions = 0;  // positions whose K/V this member holds
  int64_t kv_bytes = 0;   // bytes of those positions' K and V (every layer)
  model::CpStats stats;   // of the last step
};

class LocalGroup {
 public:
  // InvalidArgument for options that do not fit the model; ResourceExhausted when the KV
  // storage cannot be allocated.
  static Result<std::unique_ptr<LocalGroup>> create(const model::Model& model,
                                                    const GroupOptions& options);
  ~LocalGroup();
  LocalGroup(const LocalGroup&) = delete;
  LocalGroup& operator=(const LocalGroup&) = delete;

  // Appends `tokens` to the sequence as one ring step; *logits = the last token's row.
  Status prefill(std::span<const int32_t> tokens, std::vector<float>* logits);
  // Appends one token as a replicated step; *logits = its row.
  Status decode(int32_t token, std::vector<float>* logits);

  [[nodiscard]] int32_t length() const { return plan_.length(); }
  [[nodiscard]] std::vector<MemberReport> report() const;

 private:
  struct Member;
  LocalGroup(const model::Model& model, const GroupOptions& options);
  // Runs every member's step; the one with want_logits fills *logits.
  Status run(const std::vector<model::CpStep>& steps, std::vector<float>* logits);

  const model::Model& model_;
  GroupOptions options_;
  std::vector<std::unique_ptr<Member>> members_;
  struct Ring;
  std::unique_ptr<Ring> ring_;
  SequencePlan plan_;
  bool failed_ = false;
};

}  // namespace keel::cp
