// Ops::paged_attention per dispatch table, KV type and shape: 32 query heads, 4 KV heads,
// head_dim 64 (a Llama-3.2-1B-like layer), blocks of 16 positions in a permuted block table.
//   decode_<n>:      1 query token over n = 512 / 2048 / 8192 positions. Each iteration uses the
//                    next of enough layers (≥ 160 MiB of K/V) that rows stream from DRAM, as in
//                    a model whose KV exceeds the caches.
//   prefill64_<n>:   a causal tile of 64 query tokens at the last 64 positions of an n-position
//                    sequence (cache-resident K/V).
// Counters: bytes_per_second = K/V bytes read (each row once per KV head group);
// GFLOP/s = 4·n_heads·head_dim per (query, position) pair.
//
//   build/release/bench/keel_kernels_bench --benchmark_filter='paged_attention/avx512.*/f16'
#include "paged_attention_bench.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/check.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"

namespace keel::kernels {
namespace {

constexpr int64_t kHeads = 32, kKvHeads = 4, kHeadDim = 64, kKvDim = kKvHeads * kHeadDim;
constexpr int32_t kBlockSize = 16;
constexpr size_t kStreamBytes = size_t{160} << 20;

struct AttnShape {
  const char* name;
  int32_t n_kv;  // positions of the sequence
  int32_t n_q;   // query tokens, at the last n_q positions
  bool stream;   // rotate over layers so that K/V come from DRAM
};
constexpr AttnShape kAttnShapes[] = {{"decode_512", 512, 1, true},
                                     {"decode_2048", 2048, 1, true},
                                     {"decode_8192", 8192, 1, true},
                                     {"prefill64_512", 512, 64, false},
                                     {"prefill64_2048", 2048, 64, false}};

// Block-major paged storage of n_layer layers for one sequence of n_kv positions, filled with
// small pseudo-random values.
struct BenchKv {
  AlignedBuffer bytes;
  size_t block_bytes = 0, row_bytes = 0;
  int64_t n_layer = 0;
  std::vector<int32_t> table;

  PagedKv layer(int64_t l, DType dtype) const {
    PagedKv kv;
    kv.base = bytes.data() + static_cast<size_t>(l * 2 * kBlockSize) * row_bytes;
    kv.block_stride = block_bytes;
    kv.v_offset = static_cast<size_t>(kBlockSize) * row_bytes;
    kv.block_size = kBlockSize;
    kv.kv_dim = kKvDim;
    kv.dtype = dtype;
    return kv;
  }
};

BenchKv make_kv(DType dtype, const AttnShape& shape) {
  BenchKv kv;
  const size_t elem = dtype == DType::kF16 ? 2 : 4;
  kv.row_bytes = kKvDim * elem;
  const int32_t n_blocks = (shape.n_kv + kBlockSize - 1) / kBlockSize;
  const size_t layer_bytes = 2 * kBlockSize * kv.row_bytes * static_cast<size_t>(n_blocks);
  kv.n_layer =
      shape.stream ? static_cast<int64_t>((kStreamBytes + layer_bytes - 1) / layer_bytes) : 1;
  kv.block_bytes = static_cast<size_t>(kv.n_layer) * 2 * kBlockSize * kv.row_bytes;
  auto buffer = AlignedBuffer::allocate(kv.block_bytes * static_cast<size_t>(n_blocks));
  KEEL_CHECK_MSG(buffer.ok(), "cannot allocate the benchmark's KV storage");
  kv.bytes = std::move(*buffer);
  uint32_t state = 12345;
  const size_t n = kv.bytes.size() / elem;
  for (size_t i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    const float f = static_cast<float>(static_cast<int32_t>(state >> 8) - (1 << 23)) / (1 << 23);
    if (dtype == DType::kF16) {
      const uint16_t h = fp32_to_fp16(f);
      std::memcpy(kv.bytes.data() + i * 2, &h, 2);
    } else {
      std::memcpy(kv.bytes.data() + i * 4, &f, 4);
    }
  }
  kv.table.resize(static_cast<size_t>(n_blocks));
  std::iota(kv.table.begin(), kv.table.end(), 0);
  std::shuffle(kv.table.begin(), kv.table.end(), std::mt19937(3));
  return kv;
}

void run_paged_attention(benchmark::State& state, const KernelTable* table, DType dtype,
                         AttnShape shape, int threads) {
  const BenchKv kv = make_kv(dtype, shape);
  CpuFeatures cpu = detect_cpu_features();
  if (!table->needs_bf16) cpu.avx512bf16 = false;
  ThreadPool pool(threads);
  Ops ops(table->isa, &pool, cpu);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(shape.n_q * kHeads * kHeadDim));
  for (auto& v : q) v = dist(rng);
  std::vector<float> out(q.size());
  std::vector<int32_t> n_kv(static_cast<size_t>(shape.n_q));
  std::vector<const int32_t*> tables(n_kv.size(), kv.table.data());
  int64_t pairs = 0;
  for (int32_t i = 0; i < shape.n_q; ++i) {
    n_kv[static_cast<size_t>(i)] = shape.n_kv - shape.n_q + 1 + i;
    pairs += n_kv[static_cast<size_t>(i)];
  }
  const AttentionHeads heads{kHeads, kKvHeads, kHeadDim, 0.125f};
  const PagedQueries queries{shape.n_q,     q.data(),   kHeads * kHeadDim, n_kv.data(),
                             tables.data(), out.data(), kHeads * kHeadDim};
  int64_t l = 0;
  for (auto _ : state) {
    ops.paged_attention(kv.layer(l, dtype), heads, queries);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
    l = l + 1 == kv.n_layer ? 0 : l + 1;
  }
  const size_t elem = dtype == DType::kF16 ? 2 : 4;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * shape.n_kv * kKvDim * 2 *
                          static_cast<int64_t>(elem));
  state.counters["GFLOP/s"] =
      benchmark::Counter(4e-9 * static_cast<double>(pairs * kHeads * kHeadDim),
                         benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

void register_paged_attention_benchmarks() {
  const CpuFeatures cpu = detect_cpu_features();
  for (const AttnShape& shape : kAttnShapes) {
    for (DType dtype : {DType::kF32, DType::kF16}) {
      for (const KernelTable* table : all_tables()) {
        if (!table_supported(*table, cpu) || table->needs_bf16) continue;  // same attention code
        for (int threads : {1, 2}) {
          const std::string name = std::string("paged_attention/") + table->name + "/" +
                                   std::string(dtype_name(dtype)) + "/" + shape.name +
                                   "/threads:" + std::to_string(threads);
          benchmark::RegisterBenchmark(name.c_str(), run_paged_attention, table, dtype, shape,
                                       threads)
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
  }
}

}  // namespace keel::kernels
