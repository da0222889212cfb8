// measure_roofline (see roofline.h): each probe runs on the first `t` threads of the pool at once
// (the others idle), timed by wall clock around the whole parallel region; best of `reps`.
#include "kernels/roofline.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

namespace keel::kernels {
namespace {

using Clock = std::chrono::steady_clock;

// Wall seconds of fn(idx, t) run on threads 0..t-1 of `pool` together.
template <typename F>
double timed_on(ThreadPool& pool, int t, F&& fn) {
  const auto start = Clock::now();
  pool.run([&](int idx, int) {
    if (idx < t) fn(idx, t);
  });
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// [begin, end) of thread idx of t over n elements, in multiples of `grain`.
std::pair<int64_t, int64_t> slice(int64_t n, int64_t grain, int idx, int t) {
  const int64_t blocks = n / grain;
  return {blocks * idx / t * grain, blocks * (idx + 1) / t * grain};
}

float read_scalar(const float* p, int64_t n) {
  float acc[8] = {};
  for (int64_t i = 0; i < n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += p[i + j];
  }
  float s = 0;
  for (float v : acc) s += v;
  return s;
}

void triad_scalar(float* a, const float* b, const float* c, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

struct Arrays {
  int64_t n;
  std::unique_ptr<float[]> a, b, c;
};

// Best read and triad GB/s on t threads.
std::pair<double, double> bandwidth(const Arrays& m, bool avx2, ThreadPool& pool, int t, int reps) {
  double best_read = 0, best_triad = 0;
  std::vector<float> sink(static_cast<size_t>(pool.num_threads()));
  for (int r = 0; r < reps; ++r) {
    const double read_s = timed_on(pool, t, [&](int idx, int nt) {
      const auto [b, e] = slice(m.n, 64, idx, nt);
      sink[static_cast<size_t>(idx)] =
          avx2 ? probes::read_avx2(m.b.get() + b, e - b) : read_scalar(m.b.get() + b, e - b);
    });
    best_read = std::max(best_read, static_cast<double>(m.n) * 4 / read_s / 1e9);
    const double triad_s = timed_on(pool, t, [&](int idx, int nt) {
      const auto [b, e] = slice(m.n, 64, idx, nt);
      if (avx2) {
        probes::triad_avx2(m.a.get() + b, m.b.get() + b, m.c.get() + b, 0.5f, e - b);
      } else {
        triad_scalar(m.a.get() + b, m.b.get() + b, m.c.get() + b, 0.5f, e - b);
      }
    });
    best_triad = std::max(best_triad, static_cast<double>(m.n) * 12 / triad_s / 1e9);
  }
  return {best_read, best_triad};
}

// Best G operations/s of `probe` on t threads.
double peak(double (*probe)(int64_t), int64_t iters, ThreadPool& pool, int t, int reps) {
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    std::vector<double> ops(static_cast<size_t>(t));
    const double s =
        timed_on(pool, t, [&](int idx, int) { ops[static_cast<size_t>(idx)] = probe(iters); });
    double total = 0;
    for (double o : ops) total += o;
    best = std::max(best, total / s / 1e9);
  }
  return best;
}

}  // namespace

Result<Roofline> measure_roofline(const CpuFeatures& cpu, ThreadPool& pool,
                                  const RooflineOptions& options) {
  if (options.buffer_bytes < (int64_t{1} << 20) || options.reps < 1 || options.compute_iters < 1) {
    return Status::invalid_argument("roofline: buffer under 1 MiB, or no repetitions");
  }
  Roofline out;
  out.threads = pool.num_threads();
  const bool avx2 = cpu.avx2 && cpu.fma;
  const bool avx512 = cpu.avx512f && cpu.avx512bw && cpu.avx512vl && cpu.avx512dq;

  Arrays m;
  m.n = options.buffer_bytes / 4 / 64 * 64;
  m.a.reset(new float[static_cast<size_t>(m.n)]);
  m.b.reset(new float[static_cast<size_t>(m.n)]);
  m.c.reset(new float[static_cast<size_t>(m.n)]);
  pool.parallel_for(m.n, 4096, [&](int64_t b, int64_t e) {  // first touch by the threads
    std::fill(m.a.get() + b, m.a.get() + e, 0.0f);
    std::fill(m.b.get() + b, m.b.get() + e, 1.0f);
    std::fill(m.c.get() + b, m.c.get() + e, 2.0f);
  });
  std::tie(out.read_gbs_1t, out.triad_gbs_1t) = bandwidth(m, avx2, pool, 1, options.reps);
  std::tie(out.read_gbs, out.triad_gbs) = bandwidth(m, avx2, pool, out.threads, options.reps);

  const int64_t it = options.compute_iters;
  const auto both = [&](double (*probe)(int64_t), double* one, double* all) {
    *one = peak(probe, it, pool, 1, options.reps);
    *all = peak(probe, it, pool, out.threads, options.reps);
  };
  if (avx512) {
    both(probes::fma_f32_avx512, &out.fp32_gflops_1t, &out.fp32_gflops);
  } else if (avx2) {
    both(probes::fma_f32_avx2, &out.fp32_gflops_1t, &out.fp32_gflops);
  }
  if (avx512 && cpu.avx512bf16) {
    both(probes::dpbf16_avx512, &out.bf16_gflops_1t, &out.bf16_gflops);
  }
  if (avx512 && cpu.avx512vnni) {
    both(probes::dpbusd_avx512, &out.int8_gops_1t, &out.int8_gops);
    out.int8_instruction = "vpdpbusd";
  } else if (avx2) {
    both(probes::maddubs_avx2, &out.int8_gops_1t, &out.int8_gops);
    out.int8_instruction = "vpmaddubsw";
  }
  return out;
}

}  // namespace keel::kernels
