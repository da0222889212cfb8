// ChannelRemoteExperts: hello, per-member split of a layer's slots, and the replies placed back.
#include "ep/channel_remote_experts.h"

#include <algorithm>
#include <cstring>

#include "ep/expert_frame.h"
#include "ep/expert_member.h"

namespace keel::ep {

using Clock = std::chrono::steady_clock;

namespace {

int64_t ns_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count();
}

}  // namespace

Result<std::unique_ptr<ChannelRemoteExperts>> ChannelRemoteExperts::connect(
    std::vector<MemberLink> links, const model::Model& model, int32_t shard_count, int32_t max_rows,
    std::chrono::milliseconds hello_timeout, std::chrono::milliseconds step_timeout,
    std::function<void(const Status&)> on_lost, const model::ExpertPlacement* placement) {
  std::vector<Member> members;
  for (MemberLink& l : links) {
    Member m;
    m.link = std::move(l);
    m.seen = m.link.channel->reply_seq();
    members.push_back(std::move(m));
  }
  std::unique_ptr<ChannelRemoteExperts> r(new ChannelRemoteExperts(
      std::move(members), shard_count, static_cast<int32_t>(model.hparams().n_embd),
      model.hparams().moe.n_expert, step_timeout));
  r->on_lost_ = std::move(on_lost);
  for (Member& m : r->members_) {
    EpHello h = hello_for(model, m.link.shard, shard_count, max_rows);
    h.replicas = placement != nullptr ? placement->shard(m.link.shard).replicas
                                      : std::vector<std::pair<int32_t, int32_t>>{};
    KEEL_TRY(
        encode_hello(h, m.link.channel->request_seq() + 1, m.link.channel->request()).status());
    m.link.channel->post_request();
    m.sent = true;
    KEEL_ASSIGN_OR_RETURN(Frame f, r->await_reply(m, hello_timeout));
    if (f.kind == FrameKind::kError) return decode_error(f).with_prefix(m.link.name);
    if (f.kind != FrameKind::kReady) {
      return Status::corrupt(m.link.name + ": answered the hello with frame kind " +
                             std::to_string(static_cast<int>(f.kind)));
    }
    m.link.channel->connected();
  }
  return r;
}

ChannelRemoteExperts::~ChannelRemoteExperts() {
  for (Member& m : members_) {
    if (!lost_.ok() || m.sent) continue;  // a member mid-frame or lost gets no goodbye
    if (encode_bare(FrameKind::kBye, 0, m.link.channel->request()).ok()) {
      m.link.channel->post_request();
    }
  }
}

Status ChannelRemoteExperts::lose(const Member& m, const Status& why) {
  lost_ = Status::unavailable(m.link.name + " lost: " + why.message());
  if (on_lost_) on_lost_(lost_);
  return lost_;
}

Result<Frame> ChannelRemoteExperts::await_reply(Member& m, std::chrono::milliseconds timeout) {
  // The reply names the request it answers. Over shared memory it always is the one just sent;
  // over a network a frame meant for an earlier leader on a reused connection could come first:
  // skipped. (An error about a frame that did not decode carries 0.)
  const uint32_t expect = m.link.channel->request_seq();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    auto seq = m.link.channel->wait_reply(m.seen, std::max(left, std::chrono::milliseconds(1)),
                                          m.link.alive);
    if (!seq.ok()) return lose(m, seq.error());
    m.seen = *seq;
    auto f = decode_frame(m.link.channel->reply());
    if (!f.ok()) return lose(m, f.error());
    if (f->seq == expect || (f->kind == FrameKind::kError && f->seq == 0)) {
      m.sent = false;
      return *f;
    }
  }
}

Status ChannelRemoteExperts::dispatch(const model::ExpertWork& work) {
  if (!lost_.ok()) return lost_;
  for (Member& m : members_) {
    m.row.clear();
    m.expert.clear();
    m.index.clear();
  }
  for (int64_t i = 0; i < work.n_slots; ++i) {
    const int32_t e = work.slot_expert[i];
    const int32_t shard = work.slot_shard != nullptr
                              ? work.slot_shard[i]
                              : model::ExpertShard::owner(e, n_expert_, shard_count_);
    const auto owner = std::find_if(members_.begin(), members_.end(),
                                    [&](const Member& m) { return m.link.shard == shard; });
    if (owner == members_.end()) {
      return Status::invalid_argument("expert " + std::to_string(e) + " has no member");
    }
    owner->row.push_back(work.slot_row[i]);
    owner->expert.push_back(e);
    owner->index.push_back(static_cast<int32_t>(i));
  }
  dispatched_at_ = Clock::now();
  bool any = false;
  for (Member& m : members_) {
    if (m.index.empty()) continue;
    model::ExpertWork mine = work;
    mine.n_slots = static_cast<int64_t>(m.index.size());
    mine.slot_row = m.row.data();
    mine.slot_expert = m.expert.data();
    auto n =
        encode_work(mine, n_embd_, m.link.channel->request_seq() + 1, m.link.channel->request());
    if (!n.ok()) return n.error();  // too large a batch for the mailbox: a caller's bug
    m.link.channel->post_request();
    m.sent = true;
    any = true;
    m.slots->fetch_add(mine.n_slots, std::memory_order_relaxed);
  }
  if (any) {
    calls_.fetch_add(1, std::memory_order_relaxed);
    slots_.fetch_add(work.n_slots, std::memory_order_relaxed);
  }
  return Status();
}

Status ChannelRemoteExperts::collect(float* ys) {
  if (!lost_.ok()) return lost_;
  const auto t0 = Clock::now();
  uint64_t slowest = 0;
  const size_t d = static_cast<size_t>(n_embd_);
  for (Member& m : members_) {
    if (!m.sent) continue;
    KEEL_ASSIGN_OR_RETURN(Frame f, await_reply(m, step_timeout_));
    if (f.kind == FrameKind::kError) return lose(m, decode_error(f));
    auto out = decode_outputs(f);
    if (!out.ok()) return lose(m, out.error());
    if (out->n_slots != static_cast<int32_t>(m.index.size()) || out->n_embd != n_embd_) {
      return lose(m, Status::corrupt("its reply has the wrong shape"));
    }
    for (size_t i = 0; i < m.index.size(); ++i) {
      std::memcpy(ys + static_cast<size_t>(m.index[i]) * d, out->ys + i * d, d * sizeof(float));
    }
    slowest = std::max(slowest, out->compute_ns);
  }
  const int64_t waited = ns_since(t0);
  wait_ns_.fetch_add(waited, std::memory_order_relaxed);
  // The wait a free exchange would still leave: the member's compute beyond the leader's own work
  // since the dispatch. The rest of the wait is exchange left exposed.
  const int64_t ahead =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t0 - dispatched_at_).count();
  const int64_t compute_left = std::max<int64_t>(0, static_cast<int64_t>(slowest) - ahead);
  exposed_ns_.fetch_add(std::max<int64_t>(0, waited - compute_left), std::memory_order_relaxed);
  round_trip_ns_.fetch_add(ns_since(dispatched_at_), std::memory_order_relaxed);
  compute_ns_.fetch_add(static_cast<int64_t>(slowest), std::memory_order_relaxed);
  return Status();
}

RemoteExpertsStats ChannelRemoteExperts::stats() const {
  RemoteExpertsStats s;
  s.calls = calls_.load(std::memory_order_relaxed);
  s.slots = slots_.load(std::memory_order_relaxed);
  s.round_trip_s = static_cast<double>(round_trip_ns_.load(std::memory_order_relaxed)) * 1e-9;
  s.member_compute_s = static_cast<double>(compute_ns_.load(std::memory_order_relaxed)) * 1e-9;
  s.collect_wait_s = static_cast<double>(wait_ns_.load(std::memory_order_relaxed)) * 1e-9;
  s.exposed_s = static_cast<double>(exposed_ns_.load(std::memory_order_relaxed)) * 1e-9;
  for (const Member& m : members_)
    s.member_slots.push_back(m.slots->load(std::memory_order_relaxed));
  return s;
}

}  // namespace keel::ep
