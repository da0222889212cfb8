// keel_kernels_bench: matmul throughput per dispatch table, weight type and shape, through Ops
// (activation preparation and threading included); paged attention (paged_attention_bench.cpp).
//
// Shapes: decode (1 token) 2048x2048 and 5632x2048, prefill 64 and 512 tokens x 2048x2048; 1 and 2
// threads. Decode rotates over enough copies of the weights (≥ 160 MiB) that every call streams
// them from DRAM, as decoding a model larger than the caches does; decode_hot repeats one
// cache-resident matrix (the kernel's compute ceiling). Quantized types run in the GGUF row-major
// layout ("rows") and in the row-group layout the model uses at run time ("grouped";
// weight_layout.h). Counters: bytes_per_second =
// weight bytes read per second; GFLOP/s = 2·rows·cols·tokens per second.
//
//   build/release/bench/keel_kernels_bench --benchmark_filter='avx512-bf16/Q8_0/decode'
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/weight_layout.h"
#include "paged_attention_bench.h"

namespace keel::kernels {
namespace {

constexpr size_t kStreamBytes = size_t{160} << 20;

struct Shape {
  const char* name;
  int64_t rows, cols, n_tokens;
  bool stream;  // rotate over copies of the weights so that they come from DRAM
};
constexpr Shape kShapes[] = {{"decode_2048x2048", 2048, 2048, 1, true},
                             {"decode_5632x2048", 5632, 2048, 1, true},
                             {"decode_hot_2048x2048", 2048, 2048, 1, false},
                             {"prefill64_2048x2048", 2048, 2048, 64, false},
                             {"prefill512_2048x2048", 2048, 2048, 512, false}};

std::vector<std::byte> random_rows(DType dtype, int64_t rows, int64_t cols) {
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  const size_t row_bytes = dtype_row_bytes(dtype, cols);
  std::vector<std::byte> out(row_bytes * static_cast<size_t>(rows));
  std::vector<float> f(static_cast<size_t>(cols));
  const DTypeInfo& info = dtype_info(dtype);
  for (int64_t r = 0; r < rows; ++r) {
    std::byte* row = out.data() + static_cast<size_t>(r) * row_bytes;
    if (quantize_supports(dtype)) {
      for (auto& v : f) v = dist(rng);
      quantize_row(dtype, f.data(), row, cols);
      continue;
    }
    for (size_t i = 0; i < row_bytes; ++i) row[i] = static_cast<std::byte>(rng() & 0xff);
    for (int64_t b = 0; b < cols / info.block_size; ++b) {  // K-quants: finite small scales
      std::byte* blk = row + b * info.block_bytes;
      const uint16_t d = fp32_to_fp16(0.01f), dmin = fp32_to_fp16(0.005f);
      std::memcpy(blk + (dtype == DType::kQ6_K ? 208 : 0), &d, 2);
      if (dtype != DType::kQ6_K) std::memcpy(blk + 2, &dmin, 2);
    }
  }
  return out;
}

// The weights of the benchmark running now (benchmarks run one at a time, grouped by type and
// shape, so one slot suffices): `copies` identical matrices back to back.
class WeightSlot {
 public:
  const std::vector<std::byte>& get(DType dtype, const Shape& shape, bool grouped, int* copies) {
    const std::string key = std::string(dtype_name(dtype)) + shape.name + (grouped ? "g" : "r");
    if (key != key_) {
      bytes_.clear();
      bytes_.shrink_to_fit();
      std::vector<std::byte> one = random_rows(dtype, shape.rows, shape.cols);
      if (grouped) {
        group_rows_in_place(dtype, shape.rows, dtype_row_bytes(dtype, shape.cols), one.data());
      }
      copies_ = shape.stream ? static_cast<int>((kStreamBytes + one.size() - 1) / one.size()) : 1;
      bytes_.reserve(one.size() * static_cast<size_t>(copies_));
      for (int c = 0; c < copies_; ++c) bytes_.insert(bytes_.end(), one.begin(), one.end());
      key_ = key;
    }
    *copies = copies_;
    return bytes_;
  }

 private:
  std::string key_;
  std::vector<std::byte> bytes_;
  int copies_ = 1;
};

void run_matmul(benchmark::State& state, const KernelTable* table, DType dtype, Shape shape,
                bool grouped, int threads, WeightSlot* slot) {
  int copies = 1;
  const std::vector<std::byte>* weights = &slot->get(dtype, shape, grouped, &copies);
  CpuFeatures cpu = detect_cpu_features();
  if (!table->needs_bf16) cpu.avx512bf16 = false;
  ThreadPool pool(threads);
  Ops ops(table->isa, &pool, cpu);
  const size_t matrix_bytes = weights->size() / static_cast<size_t>(copies);
  std::vector<float> x(static_cast<size_t>(shape.n_tokens * shape.cols));
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  std::vector<float> y(static_cast<size_t>(shape.n_tokens * shape.rows));
  Matrix w{dtype,
           shape.rows,
           shape.cols,
           nullptr,
           dtype_row_bytes(dtype, shape.cols),
           grouped ? WeightLayout::kGrouped16 : WeightLayout::kRows};
  int i = 0;
  for (auto _ : state) {
    w.data = weights->data() + matrix_bytes * static_cast<size_t>(i);
    ops.matmul(w, x.data(), shape.n_tokens, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    i = i + 1 == copies ? 0 : i + 1;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(matrix_bytes));
  state.counters["GFLOP/s"] =
      benchmark::Counter(2e-9 * static_cast<double>(shape.rows * shape.cols * shape.n_tokens),
                         benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace
}  // namespace keel::kernels

int main(int argc, char** argv) {
  using namespace keel;
  using namespace keel::kernels;
  const CpuFeatures cpu = detect_cpu_features();
  WeightSlot slot;
  const DType types[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                         DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
  for (const Shape& shape : kShapes) {
    for (DType dtype : types) {
      for (const KernelTable* table : all_tables()) {
        if (!table_supported(*table, cpu)) continue;
        for (bool grouped : {false, true}) {
          if (grouped && !grouped_layout_supports(dtype)) continue;
          for (int threads : {1, 2}) {
            const std::string name =
                std::string(table->name) + "/" + std::string(dtype_name(dtype)) + "/" + shape.name +
                (grouped ? "/grouped" : "/rows") + "/threads:" + std::to_string(threads);
            benchmark::RegisterBenchmark(name.c_str(), run_matmul, table, dtype, shape, grouped,
                                         threads, &slot)
                ->UseRealTime()
                ->Unit(benchmark::kMicrosecond);
          }
        }
      }
    }
  }
  register_paged_attention_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
