// Causal grouped-query attention of one sequence for the trainer, forward and backward. Token t
// attends to tokens 0..t of the same sequence; query head h reads KV head h / (n_head /
// n_head_kv); scores are q·k / sqrt(head_dim). The forward keeps only each (head, token)'s
// log-sum-exp of the scores; the backward recomputes the probabilities from it (as
// FlashAttention's backward does), so memory is O(tokens · heads), not O(tokens² · heads).
//
// Work is split by KV head, each head's terms summed in token order: results do not depend on
// the thread count. Thread safety: call from the pool's owner thread.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace keel::train {

struct AttentionShape {
  int64_t n = 0;          // tokens
  int64_t n_head = 0;     // query heads
  int64_t n_head_kv = 0;  // KV heads (divides n_head)
  int64_t head_dim = 0;
};

// q [n][n_head·head_dim], k and v [n][n_head_kv·head_dim] → out [n][n_head·head_dim] and
// lse [n_head][n].
template <typename T>
void attention_forward(ThreadPool& pool, const AttentionShape& s, const T* q, const T* k,
                       const T* v, T* out, T* lse);

// Given dout, adds the gradients into dq, dk and dv (out and lse from the forward).
template <typename T>
void attention_backward(ThreadPool& pool, const AttentionShape& s, const T* q, const T* k,
                        const T* v, const T* out, const T* lse, const T* dout, T* dq, T* dk, T* dv);

}  // namespace keel::train
