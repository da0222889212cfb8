// CPU feature detection through CPUID leaves 1, 7.0, 7.1 and the OS-enabled state in XCR0.
#include "core/cpu_features.h"

#include <cpuid.h>

#include <cstdint>
#include <cstring>

namespace keel {
namespace {

uint64_t read_xcr0() {
  uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

std::string brand_string() {
  unsigned int max_ext = __get_cpuid_max(0x80000000u, nullptr);
  if (max_ext < 0x80000004u) return "";
  char brand[49] = {};
  for (unsigned int i = 0; i < 3; ++i) {
    unsigned int r[4];
    __cpuid(0x80000002u + i, r[0], r[1], r[2], r[3]);
    std::memcpy(brand + 16 * i, r, 16);
  }
  std::string s(brand);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  size_t start = s.find_first_not_of(' ');
  return start == std::string::npos ? "" : s.substr(start);
}

}  // namespace

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
  f.model_name = brand_string();
  unsigned int a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  const bool fma = (c >> 12) & 1;
  const bool f16c = (c >> 29) & 1;
  const bool avx = (c >> 28) & 1;
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = read_xcr0();
  const bool ymm_ok = (xcr0 & 0x6) == 0x6;
  const bool zmm_ok = (xcr0 & 0xe6) == 0xe6;
  if (!ymm_ok) return f;
  f.fma = fma;
  f.f16c = f16c;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = (b >> 5) & 1;
  f.avx_vnni = false;
  if (zmm_ok) {
    f.avx512f = (b >> 16) & 1;
    f.avx512dq = (b >> 17) & 1;
    f.avx512bw = (b >> 30) & 1;
    f.avx512vl = (b >> 31) & 1;
    f.avx512vnni = (c >> 11) & 1;
  }
  unsigned int a1, b1, c1, d1;
  __cpuid_count(7, 1, a1, b1, c1, d1);
  f.avx_vnni = (a1 >> 4) & 1;
  if (zmm_ok) f.avx512bf16 = (a1 >> 5) & 1;
  return f;
}

std::string CpuFeatures::to_string() const {
  std::string s;
  auto add = [&s](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(avx2, "AVX2");
  add(fma, "FMA");
  add(f16c, "F16C");
  add(avx512f, "AVX512F");
  add(avx512bw, "AVX512BW");
  add(avx512vl, "AVX512VL");
  add(avx512dq, "AVX512DQ");
  add(avx512vnni, "AVX512_VNNI");
  add(avx512bf16, "AVX512_BF16");
  add(avx_vnni, "AVX_VNNI");
  return s.empty() ? "none" : s;
}

}  // namespace keel
