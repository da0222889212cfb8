# Warning and sanitizer flags shared by every keel target (applied through keel_options).
add_library(keel_options INTERFACE)
target_compile_options(keel_options INTERFACE -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
# GCC 12 reports false positives from inlined libstdc++ string/vector code at -O2/-O3
# (GCC bugs 105329, 105545, 105651); they are not findings about keel's code. The same holds for
# -Wfree-nonheap-object on std::future's result holder once a unity batch inlines it deeply
# enough (the release preset's cluster batch: "operator delete called on unallocated object").
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(keel_options INTERFACE -Wno-restrict -Wno-stringop-overflow
                                                -Wno-array-bounds -Wno-stringop-overread
                                                -Wno-free-nonheap-object)
endif()
# Boost 1.74's Asio recognises C++20 coroutines under GCC only (for clang it looks for the
# Coroutines TS); clang 15 with libstdc++'s <coroutine> supports them, so say so.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  target_compile_definitions(keel_options INTERFACE BOOST_ASIO_HAS_CO_AWAIT=1)
endif()
if(KEEL_WERROR)
  target_compile_options(keel_options INTERFACE -Werror)
endif()
# Clang checks the thread-safety annotations (core/thread_annotations.h, core/mutex.h): a member
# read or written without the mutex that guards it, or a function called without the mutex it
# requires, is an error. The fuzz preset's clang build compiles every module its targets link
# (cluster, with the JE, among them) and, for this check, membership, store, host, pipeline and
# engine (tests/fuzz/CMakeLists.txt), so `make test` checks them.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  target_compile_options(keel_options INTERFACE -Wthread-safety -Werror=thread-safety)
endif()
# Unity builds (CMAKE_UNITY_BUILD, the sanitizer presets: they compile each module's shared
# headers and templates once per batch instead of once per file). GCC warns about a type with
# internal linkage used in a "header", and every file of a batch counts as one; names in the
# anonymous namespaces of one module's files must differ (a test binary may opt out: NO_UNITY).
if(CMAKE_UNITY_BUILD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(keel_options INTERFACE -Wno-subobject-linkage)
endif()
if(KEEL_SANITIZE)
  target_compile_options(keel_options INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer
                                                -fno-sanitize-recover=undefined)
  target_link_options(keel_options INTERFACE -fsanitize=address,undefined)
endif()
if(KEEL_TSAN)
  if(KEEL_SANITIZE)
    message(FATAL_ERROR "KEEL_TSAN and KEEL_SANITIZE cannot be combined")
  endif()
  target_compile_options(keel_options INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  target_link_options(keel_options INTERFACE -fsanitize=thread)
  # TSan does not model standalone atomic_thread_fence (GCC refuses them under -Werror=tsan).
  # Asio's only use is its fenced_block around handler calls, which its scheduler's mutex already
  # orders; without it TSan sees exactly the synchronization Asio relies on.
  target_compile_definitions(keel_options INTERFACE BOOST_ASIO_DISABLE_FENCED_BLOCK)
endif()
if(KEEL_BUILD_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "KEEL_BUILD_FUZZ needs clang (libFuzzer): use the fuzz preset")
  endif()
  # Coverage feedback for libFuzzer in every library; the fuzz targets link -fsanitize=fuzzer.
  target_compile_options(keel_options INTERFACE -fsanitize=fuzzer-no-link)
endif()
target_include_directories(keel_options INTERFACE ${CMAKE_SOURCE_DIR}/src)

# keel_add_module(NAME SOURCES... DEPS ...): one static library per module, named keel_NAME.
function(keel_add_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(keel_${name} STATIC ${ARG_SOURCES})
  target_link_libraries(keel_${name} PUBLIC keel_options ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()

# keel_add_test(NAME [NO_UNITY] [RUN_SERIAL] SOURCES... DEPS ...): one GoogleTest binary
# registered with CTest. RUN_SERIAL: each of its tests runs with no other test beside it (tests
# that load the machine on purpose, or measure a process's CPU time).
function(keel_add_test name)
  cmake_parse_arguments(ARG "NO_UNITY;RUN_SERIAL" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  if(ARG_NO_UNITY)  # files whose local helpers share names: each compiled on its own
    set_target_properties(${name} PROPERTIES UNITY_BUILD OFF)
  endif()
  target_link_libraries(${name} PRIVATE keel_options keel_test_support ${ARG_DEPS}
                        GTest::gmock GTest::gtest_main)
  if(KEEL_SANITIZE)
    # Test code is compiled without optimization: it halves the sanitized build (GoogleTest macro
    # expansions are costly to optimize) while the code under test keeps -O1.
    target_compile_options(${name} PRIVATE -O0)
  endif()
  set(props)
  if(ARG_LABELS)
    list(APPEND props LABELS "${ARG_LABELS}")
  endif()
  if(ARG_RUN_SERIAL)
    list(APPEND props RUN_SERIAL TRUE)
  endif()
  if(props)
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES ${props})
  else()
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60)
  endif()
endfunction()
