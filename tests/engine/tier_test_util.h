// Shared fixtures of the engine tier tests (engine_tiers_test, engine_kv_q8_test): stories260K on a
// 12-block pool of 16-position blocks, 64-token prompts (4 blocks; a repeat can reuse the first 3,
// leaving one token to compute), and a churn that pushes an earlier prompt's cached blocks out of
// the pool onto the tiers. Test-only.
#pragma once

#include <cstdint>
#include <vector>

#include "engine_test_util.h"

namespace keel::engine {
namespace {

constexpr int32_t kBlock = 16;

std::vector<int32_t> prompt(int32_t base) {
  std::vector<int32_t> p = {1};
  for (int32_t i = 0; i < 63; ++i) p.push_back(base + i);
  return p;
}

// 12 blocks of `kv` rows: a few other prompts push the first one's cached blocks out of the pool.
// `kv_row_bytes` is the bytes of one position's K (or V) row in one layer (stories260K: 5 layers,
// kv_dim 32 — 128 bytes f32, 34 bytes Q8_0).
EngineConfig small_pool_config(DType kv = DType::kF32, int64_t kv_row_bytes = 32 * 4) {
  EngineConfig c = base_config();
  c.block_size = kBlock;
  c.kv_dtype = kv;
  c.scheduler.max_num_seqs = 1;
  c.kv_cache_bytes = 12 * 5 * 2 * kBlock * kv_row_bytes;
  return c;
}

// Runs prompts that evict every cached block of an earlier one from the pool, then waits until
// the transfer thread has stored every demoted block.
void churn(Engine& e) {
  for (int32_t base : {100, 160, 220, 280}) run_one(e, greedy(prompt(base), 4));
  EXPECT_TRUE(eventually([&] { return e.stats().tier_transfers_pending == 0; }));
}

}  // namespace
}  // namespace keel::engine
