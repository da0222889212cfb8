// Clang's thread-safety annotations (-Wthread-safety) as keel macros: which mutex guards a member
// (KEEL_GUARDED_BY), which a function needs held or not held (KEEL_REQUIRES, KEEL_EXCLUDES), and
// what a lock type acquires and releases. Clang checks them at compile time; other compilers see
// nothing. core/mutex.h gives the annotated mutex and locks they name (std::mutex carries no
// annotations in libstdc++).
//
// Thread safety: macros only.
#pragma once

#if defined(__clang__)
#define KEEL_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define KEEL_THREAD_ANNOTATION(x)
#endif

#define KEEL_CAPABILITY(x) KEEL_THREAD_ANNOTATION(capability(x))
#define KEEL_SCOPED_CAPABILITY KEEL_THREAD_ANNOTATION(scoped_lockable)
#define KEEL_GUARDED_BY(x) KEEL_THREAD_ANNOTATION(guarded_by(x))
#define KEEL_PT_GUARDED_BY(x) KEEL_THREAD_ANNOTATION(pt_guarded_by(x))
#define KEEL_REQUIRES(...) KEEL_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define KEEL_EXCLUDES(...) KEEL_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define KEEL_ACQUIRE(...) KEEL_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define KEEL_RELEASE(...) KEEL_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define KEEL_TRY_ACQUIRE(...) KEEL_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define KEEL_RETURN_CAPABILITY(x) KEEL_THREAD_ANNOTATION(lock_returned(x))
#define KEEL_NO_THREAD_SAFETY_ANALYSIS KEEL_THREAD_ANNOTATION(no_thread_safety_analysis)
