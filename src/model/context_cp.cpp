// Context::forward_cp: one member's part of a context-parallel step (context_parallel.h). The
// layer loop is forward()'s — norm and Q/K/V projection of this member's query rows (RoPE at their
// global positions), their K/V written to this member's slots, attention, output projection, FFN —
// except the attention, which computes one part per member of the group and merges them:
//   ring step:       parts[j] = the queries over member j's shard, the shards passed around the
//                    ring (pack_kv_shard) and attended in place as they arrive;
//   replicated step: parts[rank] computed here, the others' gathered (pack_attention_state).
// Then every row is merged over its parts in member order (merge_attention_parts).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>

#include "core/index_cast.h"
#include "kernels/weight_layout.h"
#include "model/context.h"
#include "model/cp_message.h"

namespace keel::model {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// recv_prev, its wait added to stats.
Result<CpMessage> timed_recv(CpRing& ring, CpStats* stats) {
  const auto t0 = Clock::now();
  Result<CpMessage> msg = ring.recv_prev();
  if (stats != nullptr) stats->wait_seconds += seconds_since(t0);
  return msg;
}

Status timed_flush(CpRing& ring, CpStats* stats) {
  const auto t0 = Clock::now();
  Status st = ring.flush();
  if (stats != nullptr) stats->wait_seconds += seconds_since(t0);
  return st;
}

Status send(CpRing& ring, const CpMessage& msg, CpStats* stats) {
  if (stats != nullptr) stats->bytes_sent += static_cast<int64_t>(msg->size());
  return ring.send_next(msg);
}

Status invalid(const std::string& what) {
  return Status::invalid_argument("context-parallel step: " + what);
}

bool strictly_ascending(const std::vector<int32_t>& v) {
  return std::adjacent_find(v.begin(), v.end(), std::greater_equal<>()) == v.end();
}

}  // namespace

Status Context::validate_cp(const CpStep& step, const KvStorage& kv,
                            const ContextParallel& cp) const {
  if (!full_range()) return invalid("needs every layer of the model");
  if (cp.ring == nullptr || cp.ring->size() < 1 || cp.ring->rank() < 0 ||
      cp.ring->rank() >= cp.ring->size()) {
    return invalid("no ring, or a rank outside it");
  }
  if (ep_.remote != nullptr) return invalid("expert parallelism is not supported with it");
  const KvLayout& layout = kv.layout();
  if (layout.n_layer != hp_.n_layer || layout.kv_dim != hp_.kv_dim()) {
    return invalid("KV storage layout does not match the model");
  }
  const size_t n = step.tokens.size();
  if (n == 0 || std::ssize(step.tokens) > max_tokens_) {
    return invalid(std::to_string(n) + " tokens (1 to " + std::to_string(max_tokens_) + ")");
  }
  if (step.positions.size() != n || step.slots.size() != n) {
    return invalid("tokens, positions and slots differ in length");
  }
  for (int32_t t : step.tokens) {
    if (t < 0 || t >= hp_.n_vocab) return invalid("token id " + std::to_string(t));
  }
  if (!strictly_ascending(step.positions) || step.positions.front() < 0) {
    return invalid("positions are not strictly ascending from ≥ 0");
  }
  if (step.positions.back() >= model_.n_ctx()) {
    return Status::out_of_range("position " + std::to_string(step.positions.back()) +
                                " is beyond the model's context of " +
                                std::to_string(model_.n_ctx()));
  }
  if (!strictly_ascending(step.shard) || (!step.shard.empty() && step.shard.front() < 0)) {
    return invalid("shard positions are not strictly ascending from ≥ 0");
  }
  const int64_t bs = layout.block_size;
  if (std::ssize(step.block_table) < (std::ssize(step.shard) + bs - 1) / bs) {
    return invalid("the block table does not cover the shard");
  }
  for (int32_t b : step.block_table) {
    if (b < 0 || b >= kv.num_blocks()) return invalid("block " + std::to_string(b));
  }
  for (size_t t = 0; t < n; ++t) {
    const int32_t s = step.slots[t];
    if (s < 0 && !step.replicated) return invalid("a ring step's tokens are all stored here");
    if (s >= 0 && (sz(s) >= step.shard.size() || step.shard[sz(s)] != step.positions[t])) {
      return invalid("slot " + std::to_string(s) + " does not hold position " +
                     std::to_string(step.positions[t]));
    }
  }
  return Status();
}

Status Context::forward_cp(const CpStep& step, KvStorage& kv, kernels::Ops& ops,
                           const ContextParallel& cp, std::vector<float>* logits) {
  KEEL_TRY(validate_cp(step, kv, cp));
  if (cp.stats != nullptr) *cp.stats = {};
  lora_.bind(Batch{});  // the base model only
  const auto n = std::ssize(step.tokens);
  const int64_t d = hp_.n_embd, kv_dim = hp_.kv_dim();
  const kernels::Matrix& e = model_.weights().token_embd;
  for (int64_t t = 0; t < n; ++t) {
    kernels::dequantize_matrix_row(e, step.tokens[sz(t)], x_.data() + t * d);
  }
  const auto parts = sz(cp.ring->size());
  cp_acc_.resize(parts * sz(n * hp_.q_dim()));
  cp_m_.resize(parts * sz(n * hp_.n_head));
  cp_l_.resize(parts * sz(n * hp_.n_head));
  const int32_t bs = kv.layout().block_size;
  for (int64_t il = 0; il < hp_.n_layer; ++il) {
    project_qkv(il, step.positions.data(), 0, n, ops);
    for (int64_t t = 0; t < n; ++t) {
      const int32_t s = step.slots[sz(t)];
      if (s < 0) continue;
      const int32_t block = step.block_table[sz(s / bs)];
      kv.write_row(k_.data() + t * kv_dim, kv.k_row(block, il, s % bs));
      kv.write_row(v_.data() + t * kv_dim, kv.v_row(block, il, s % bs));
    }
    KEEL_TRY(cp_attend(il, step, kv, ops, cp));
    output_projection(il, 0, n, ops);
    ffn_block(il, n, ops);
  }
  KEEL_TRY(take_moe_status());
  if (logits == nullptr) return Status();
  if (!step.want_logits) {
    logits->clear();
    return Status();
  }
  std::memcpy(xn_.data(), x_.data() + (n - 1) * d, sz(d) * sizeof(float));
  logits->assign(sz(hp_.n_vocab), 0.0f);
  float* const out[] = {logits->data()};
  ops.rms_norm_matmul_many({&model_.weights().output, 1}, xn_.data(),
                           model_.weights().output_norm.data(), hp_.rms_eps, 1, out);
  return Status();
}

Status Context::cp_attend(int64_t il, const CpStep& step, const KvStorage& kv, kernels::Ops& ops,
                          const ContextParallel& cp) {
  KEEL_TRY(step.replicated ? cp_gather_parts(il, step, kv, ops, cp)
                           : cp_ring_parts(il, step, kv, ops, cp));
  const auto n = std::ssize(step.tokens);
  const int64_t q_dim = hp_.q_dim(), n_head = hp_.n_head, hd = hp_.head_dim;
  const auto parts = sz(cp.ring->size());
  std::vector<const float*> acc(parts);
  std::vector<float> m(parts), l(parts);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < n_head; ++h) {
      for (size_t p = 0; p < parts; ++p) {
        const size_t row = p * sz(n) + sz(t);
        acc[p] = cp_acc_.data() + row * sz(q_dim) + sz(h * hd);
        m[p] = cp_m_[row * sz(n_head) + sz(h)];
        l[p] = cp_l_[row * sz(n_head) + sz(h)];
      }
      kernels::merge_attention_parts(acc, m, l, hd, attn_.data() + t * q_dim + h * hd);
    }
  }
  return Status();
}

void Context::cp_attend_part(const CpStep& step, const kernels::PagedKv& kv, const int32_t* table,
                             std::span<const int32_t> shard, int part, kernels::Ops& ops,
                             CpStats* stats) {
  const auto n = std::ssize(step.tokens);
  const int64_t q_dim = hp_.q_dim(), n_head = hp_.n_head;
  float* const acc = cp_acc_.data() + sz(part) * sz(n * q_dim);
  float* const m = cp_m_.data() + sz(part) * sz(n * n_head);
  float* const l = cp_l_.data() + sz(part) * sz(n * n_head);
  cp_n_kv_.resize(sz(n));
  cp_tables_.assign(sz(n), table);
  // The queries ascend, so the rows that see none of the shard come first.
  int64_t first = n, pairs = 0;
  for (int64_t t = 0; t < n; ++t) {
    const auto seen = std::upper_bound(shard.begin(), shard.end(), step.positions[sz(t)]);
    cp_n_kv_[sz(t)] = static_cast<int32_t>(seen - shard.begin());
    pairs += cp_n_kv_[sz(t)];
    if (cp_n_kv_[sz(t)] > 0 && first == n) first = t;
  }
  std::fill(l, l + first * n_head, 0.0f);
  std::fill(m, m + first * n_head, -std::numeric_limits<float>::infinity());
  if (stats != nullptr) stats->attention_pairs += pairs * n_head;
  if (first == n) return;
  const auto t0 = Clock::now();
  const kernels::AttentionHeads heads{hp_.n_head, hp_.n_head_kv, hp_.head_dim,
                                      1.0f / std::sqrt(static_cast<float>(hp_.head_dim))};
  kernels::PagedQueries queries;
  queries.n_q = n - first;
  queries.q = q_.data() + first * q_dim;
  queries.q_stride = q_dim;
  queries.n_kv = cp_n_kv_.data() + first;
  queries.block_tables = cp_tables_.data() + first;
  queries.out = acc + first * q_dim;
  queries.out_stride = q_dim;
  queries.state_m = m + first * n_head;
  queries.state_l = l + first * n_head;
  ops.paged_attention(kv, heads, queries);
  if (stats != nullptr) stats->attention_seconds += seconds_since(t0);
}

Status Context::cp_ring_parts(int64_t il, const CpStep& step, const KvStorage& kv,
                              kernels::Ops& ops, const ContextParallel& cp) {
  CpRing& ring = *cp.ring;
  const int n_members = ring.size(), rank = ring.rank();
  CpMessage cur;
  if (n_members > 1) cur = pack_kv_shard(kv, il, step.block_table, step.shard);
  for (int s = 0; s < n_members; ++s) {
    const int origin = (rank - s + n_members) % n_members;
    const bool more = s + 1 < n_members;
    CpMessage next;
    if (more) KEEL_TRY(send(ring, cur, cp.stats));
    if (more && !cp.overlap) {
      KEEL_ASSIGN_OR_RETURN(next, timed_recv(ring, cp.stats));
      KEEL_TRY(timed_flush(ring, cp.stats));
    }
    if (s == 0) {
      cp_attend_part(step, kv.paged(il), step.block_table.data(), step.shard, origin, ops,
                     cp.stats);
    } else {
      KEEL_ASSIGN_OR_RETURN(const CpKvShard shard, view_kv_shard(cur, kv.layout(), il));
      if (std::ssize(cp_identity_) < shard.n_blocks) {
        const auto old = static_cast<int32_t>(cp_identity_.size());
        cp_identity_.resize(sz(shard.n_blocks));
        for (int32_t b = old; b < shard.n_blocks; ++b) cp_identity_[sz(b)] = b;
      }
      cp_attend_part(step, shard.kv, cp_identity_.data(), shard.positions, origin, ops, cp.stats);
    }
    if (more && cp.overlap) {
      KEEL_ASSIGN_OR_RETURN(next, timed_recv(ring, cp.stats));
    }
    cur = std::move(next);
  }
  return Status();
}

Status Context::cp_gather_parts(int64_t il, const CpStep& step, const KvStorage& kv,
                                kernels::Ops& ops, const ContextParallel& cp) {
  CpRing& ring = *cp.ring;
  const int n_members = ring.size(), rank = ring.rank();
  cp_attend_part(step, kv.paged(il), step.block_table.data(), step.shard, rank, ops, cp.stats);
  if (n_members == 1) return Status();
  const auto n = std::ssize(step.tokens);
  const int64_t q_dim = hp_.q_dim(), n_head = hp_.n_head;
  const size_t acc_floats = sz(n * q_dim), ml_floats = sz(n * n_head);
  CpStateView own{n,
                  n_head,
                  hp_.head_dim,
                  cp_acc_.data() + sz(rank) * acc_floats,
                  cp_m_.data() + sz(rank) * ml_floats,
                  cp_l_.data() + sz(rank) * ml_floats};
  CpMessage cur = pack_attention_state(il, own);
  for (int s = 1; s < n_members; ++s) {
    KEEL_TRY(send(ring, cur, cp.stats));
    KEEL_ASSIGN_OR_RETURN(cur, timed_recv(ring, cp.stats));
    const auto origin = sz((rank - s + n_members) % n_members);
    KEEL_ASSIGN_OR_RETURN(const CpStateView got,
                          view_attention_state(cur, il, n, n_head, hp_.head_dim));
    std::copy(got.acc, got.acc + acc_floats, cp_acc_.data() + origin * acc_floats);
    std::copy(got.m, got.m + ml_floats, cp_m_.data() + origin * ml_floats);
    std::copy(got.l, got.l + ml_floats, cp_l_.data() + origin * ml_floats);
  }
  return Status();
}

}  // namespace keel::model
