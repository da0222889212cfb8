// LocalGroup: a context-parallel group of member threads (see local_group.h).
#include "cp/local_group.h"

#include <algorithm>
#include <string>
#include <thread>

#include "core/index_cast.h"
#include "core/thread_pool.h"
#include "cp/local_ring.h"
#include "model/context.h"
#include "model/kv_storage.h"

namespace keel::cp {

struct LocalGroup::Member {
  Member(const model::Model& model, const GroupOptions& o, int64_t max_step, model::KvStorage kv)
      : pool(o.threads_per_member), ops(o.isa, &pool), ctx(model, max_step), kv(std::move(kv)) {}
  ThreadPool pool;
  kernels::Ops ops;
  model::Context ctx;
  model::KvStorage kv;
  model::CpStats stats;
  std::vector<float> logits;
};

struct LocalGroup::Ring {
  explicit Ring(int n) : ring(n) {}
  LocalRing ring;
};

LocalGroup::LocalGroup(const model::Model& model, const GroupOptions& options)
    : model_(model), options_(options), plan_(options.n_members, options.block_size) {}

LocalGroup::~LocalGroup() = default;

Result<std::unique_ptr<LocalGroup>> LocalGroup::create(const model::Model& model,
                                                       const GroupOptions& o) {
  if (o.n_members < 1 || o.threads_per_member < 1) {
    return Status::invalid_argument("a context-parallel group needs ≥ 1 member of ≥ 1 thread");
  }
  if (o.max_positions < 1 || o.max_positions > model.n_ctx()) {
    return Status::invalid_argument("max_positions " + std::to_string(o.max_positions) +
                                    " is outside [1, " + std::to_string(model.n_ctx()) + "]");
  }
  const model::KvLayout layout =
      model::KvLayout::for_model(model.hparams(), o.block_size, o.kv_type);
  KEEL_TRY(layout.validate());
  // A member's share, with room for each prefill's rounding: a tenth more and four blocks.
  const int64_t share = (o.max_positions + o.n_members - 1) / o.n_members;
  const auto blocks = static_cast<int32_t>((share + share / 10) / o.block_size + 4);
  const int64_t max_step = o.max_step_tokens > 0 ? o.max_step_tokens : o.max_positions;
  std::unique_ptr<LocalGroup> g(new LocalGroup(model, o));
  for (int r = 0; r < o.n_members; ++r) {
    KEEL_ASSIGN_OR_RETURN(model::KvStorage kv, model::KvStorage::create(layout, blocks));
    g->members_.push_back(std::make_unique<Member>(model, o, max_step, std::move(kv)));
  }
  g->ring_ = std::make_unique<Ring>(o.n_members);
  return g;
}

Status LocalGroup::prefill(std::span<const int32_t> tokens, std::vector<float>* logits) {
  if (failed_) return Status::failed_precondition("the context-parallel group failed earlier");
  const auto n = static_cast<int32_t>(tokens.size());
  if (n < 1 || plan_.length() + n > options_.max_positions) {
    return Status::out_of_range("the group holds " + std::to_string(options_.max_positions) +
                                " positions; " + std::to_string(plan_.length()) + " + " +
                                std::to_string(n) + " do not fit");
  }
  std::vector<model::CpStep> steps = plan_.append(tokens);
  KEEL_TRY(run(steps, logits));
  plan_.commit(steps);
  return Status();
}

Status LocalGroup::decode(int32_t token, std::vector<float>* logits) {
  const int32_t one[] = {token};
  return prefill(one, logits);
}

Status LocalGroup::run(const std::vector<model::CpStep>& steps, std::vector<float>* logits) {
  const int n = options_.n_members;
  for (int r = 0; r < n; ++r) {
    const int64_t blocks = std::ssize(steps[sz(r)].block_table);
    if (blocks > members_[sz(r)]->kv.num_blocks()) {
      return Status::resource_exhausted("context-parallel member " + std::to_string(r) +
                                        " would need " + std::to_string(blocks) + " KV blocks of " +
                                        std::to_string(members_[sz(r)]->kv.num_blocks()));
    }
  }
  std::vector<Status> status(sz(n));
  auto work = [&](int r) {
    Member& m = *members_[sz(r)];
    const model::ContextParallel cp{&ring_->ring.end(r), options_.overlap, &m.stats};
    status[sz(r)] = m.ctx.forward_cp(steps[sz(r)], m.kv, m.ops, cp, &m.logits);
    if (!status[sz(r)].ok()) ring_->ring.close();
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < n; ++r) threads.emplace_back(work, r);
  work(0);
  for (std::thread& t : threads) t.join();
  // The first member's own error, rather than the "ring closed" it caused the others.
  const Status* first_error = nullptr;
  for (const Status& st : status) {
    if (st.ok()) continue;
    if (first_error == nullptr || (first_error->code() == StatusCode::kUnavailable &&
                                   st.code() != StatusCode::kUnavailable)) {
      first_error = &st;
    }
  }
  if (first_error != nullptr) {
    failed_ = true;
    return *first_error;
  }
  for (int r = 0; r < n; ++r) {
    if (steps[sz(r)].want_logits && logits != nullptr) *logits = members_[sz(r)]->logits;
  }
  return Status();
}

std::vector<MemberReport> LocalGroup::report() const {
  std::vector<MemberReport> out;
  for (size_t r = 0; r < members_.size(); ++r) {
    const model::KvLayout& layout = members_[r]->kv.layout();
    const auto held = std::ssize(plan_.shard(static_cast<int>(r)));
    const auto blocks = (held + layout.block_size - 1) / layout.block_size;
    out.push_back({held, blocks * static_cast<int64_t>(layout.block_bytes()), members_[r]->stats});
  }
  return out;
}

}  // namespace keel::cp
