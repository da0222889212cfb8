// Registration of the paged-attention microbenchmarks (paged_attention_bench.cpp) with Google
// Benchmark; called once from the benchmark binary's main() before benchmarks run.
#pragma once

namespace keel::kernels {

void register_paged_attention_benchmarks();

}  // namespace keel::kernels
