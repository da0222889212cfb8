// SequencePlan: the steps that extend a context-parallel sequence (see sequence_plan.h).
#include "cp/sequence_plan.h"

#include <iterator>

#include "core/check.h"
#include "core/index_cast.h"
#include "cp/cp_plan.h"

namespace keel::cp {

SequencePlan::SequencePlan(int n_members, int32_t block_size)
    : block_size_(block_size), shards_(sz(n_members)) {
  KEEL_CHECK(n_members >= 1 && block_size >= 1);
}

model::CpStep SequencePlan::step_for(int r, std::span<const int32_t> stored) const {
  model::CpStep step;
  step.shard = shards_[sz(r)];
  for (int32_t p : stored) {
    step.slots.push_back(static_cast<int32_t>(step.shard.size()));
    step.shard.push_back(p);
  }
  const auto n_blocks = (static_cast<int32_t>(step.shard.size()) + block_size_ - 1) / block_size_;
  for (int32_t b = 0; b < n_blocks; ++b) step.block_table.push_back(b);
  return step;
}

std::vector<model::CpStep> SequencePlan::append(std::span<const int32_t> tokens) const {
  KEEL_CHECK(!tokens.empty());
  return std::ssize(tokens) < 2 * std::ssize(shards_) ? replicated_steps(tokens)
                                                      : ring_steps(tokens);
}

std::vector<model::CpStep> SequencePlan::ring_steps(std::span<const int32_t> tokens) const {
  const auto n = static_cast<int32_t>(tokens.size());
  const auto split = zigzag_split(length_, length_ + n, n_members());
  std::vector<model::CpStep> steps;
  for (int r = 0; r < n_members(); ++r) {
    model::CpStep step = step_for(r, split[sz(r)]);
    for (int32_t p : split[sz(r)]) step.tokens.push_back(tokens[sz(p - length_)]);
    step.positions = split[sz(r)];
    step.want_logits = step.positions.back() == length_ + n - 1;
    steps.push_back(std::move(step));
  }
  return steps;
}

std::vector<model::CpStep> SequencePlan::replicated_steps(std::span<const int32_t> tokens) const {
  const auto n = static_cast<int32_t>(tokens.size());
  std::vector<int64_t> sizes;
  for (const auto& s : shards_) sizes.push_back(std::ssize(s));
  std::vector<std::vector<int32_t>> stored(shards_.size());
  std::vector<int> owner(sz(n));
  for (int32_t i = 0; i < n; ++i) {
    owner[sz(i)] = decode_owner(sizes);
    stored[sz(owner[sz(i)])].push_back(length_ + i);
    ++sizes[sz(owner[sz(i)])];
  }
  std::vector<model::CpStep> steps;
  for (int r = 0; r < n_members(); ++r) {
    model::CpStep step = step_for(r, stored[sz(r)]);
    std::vector<int32_t> slots(sz(n), -1);
    size_t next = 0;
    for (int32_t i = 0; i < n; ++i) {
      if (owner[sz(i)] == r) slots[sz(i)] = step.slots[next++];
    }
    step.slots = std::move(slots);
    step.tokens.assign(tokens.begin(), tokens.end());
    for (int32_t i = 0; i < n; ++i) step.positions.push_back(length_ + i);
    step.replicated = true;
    step.want_logits = r == 0;
    steps.push_back(std::move(step));
  }
  return steps;
}

void SequencePlan::commit(const std::vector<model::CpStep>& steps) {
  KEEL_CHECK(steps.size() == shards_.size());
  for (size_t r = 0; r < steps.size(); ++r) shards_[r] = steps[r].shard;
  length_ = steps[0].positions.back() + 1;
}

}  // namespace keel::cp
