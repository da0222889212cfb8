// CpuFeatures: the x86-64 vector extensions this CPU and OS support (CPUID + XGETBV), detected
// once by the caller (main or an engine) and passed to whatever selects kernels.
#pragma once

#include <string>

namespace keel {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool avx_vnni = false;
  std::string model_name;  // "AMD EPYC ..." from the brand string, or "" if unavailable

  // Human-readable list, e.g. "AVX2 FMA F16C AVX512F AVX512BW AVX512VL AVX512_VNNI AVX512_BF16".
  [[nodiscard]] std::string to_string() const;
};

CpuFeatures detect_cpu_features();

}  // namespace keel
