// The failure path of KEEL_CHECK: one line on stderr, then abort (core dump / sanitizer trace).
#include "core/check.h"

#include <cstdio>
#include <cstdlib>

namespace keel::internal {

void check_failed(const char* file, int line, const char* condition, const char* msg) {
  std::fprintf(stderr, "keel: check failed at %s:%d: %s%s%s\n", file, line, condition,
               msg ? " — " : "", msg ? msg : "");
  std::fflush(stderr);
  std::abort();
}

}  // namespace keel::internal
