// EarlyExit: what a forward pass with per-token early exit (SpecEE, Context::forward_early_exit)
// is given and reports. After each layer il < n_layer − 1 the pass asks `decide` about every
// batch token that may exit and has not yet; a token that exits keeps its residual row h from
// then on ("frozen"): its logits and hidden output are computed from h, and the K/V rows of the
// layers it skipped are FILLED from h (each skipped layer's K/V projections of h, the way every
// later token of the same sequence attends to it). No KV row is ever left unwritten, so later
// tokens attend over fully written blocks.
// Invariants: may_exit has one entry per batch token (or is empty = none may exit); exit_layer
// is replaced with one entry per batch token: the layer its pass ended at (n_layer − 1 = full
// depth). Thread safety: plain data; `decide` runs on the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace keel::model {

struct EarlyExit {
  std::vector<uint8_t> may_exit;  // [T] 1 = the token may stop early
  // Asked after layer `il` for token `t` with its residual row (n_embd floats, before any norm):
  // true stops it at this layer. Called in layer order, then batch order.
  std::function<bool(int64_t il, size_t t, std::span<const float> residual)> decide;
  std::vector<int32_t> exit_layer;  // [T] out: the layer each token's pass ended at
  int64_t layers_run = 0;           // out: full layers computed for the batch
};

}  // namespace keel::model
