// KEEL_CHECK: aborts with file, line and the failed condition when an invariant is broken.
// For programming errors only; anything a user or a file can cause returns a Status instead.
// Always on (also in Release): the checks guard memory safety at module boundaries.
#pragma once

namespace keel::internal {
[[noreturn]] void check_failed(const char* file, int line, const char* condition, const char* msg);
}  // namespace keel::internal

#define KEEL_CHECK(cond)                                                  \
  do {                                                                    \
    if (!(cond)) [[unlikely]]                                             \
      ::keel::internal::check_failed(__FILE__, __LINE__, #cond, nullptr); \
  } while (0)

#define KEEL_CHECK_MSG(cond, msg)                                       \
  do {                                                                  \
    if (!(cond)) [[unlikely]]                                           \
      ::keel::internal::check_failed(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)

// Debug-only variant for hot loops.
#ifdef NDEBUG
#define KEEL_DCHECK(cond) \
  do {                    \
  } while (0)
#else
#define KEEL_DCHECK(cond) KEEL_CHECK(cond)
#endif
