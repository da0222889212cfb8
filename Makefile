# The two set-up commands of the README, plus helpers. Both install what they need first.
#   make run    build (Release) and serve the OpenAI API (keel serve $(ARGS))
#   make test   build (Debug + ASan/UBSan), check formatting, run every test; then a brief run of
#               each fuzz target (clang) and the TSan tests of the concurrent core; one summary
# Longer checks, outside `make test` (see docs/testing.md):
#   make fuzz   every fuzz target for $(FUZZ_SECONDS) s, one after another
#   make tsan   the engine, scheduler, tier and server tests under ThreadSanitizer
#   bench/soak.sh   30 minutes of mixed load against keel serve
.PHONY: run test deps deps-run release asan fuzz-build fuzz tsan-core-build tsan format format-check clean

ARGS ?=
FUZZ_SECONDS ?= 180
CLANG_CXX := clang++-15

deps:
	@scripts/install-deps.sh

# `make run` installs only what building and running keel needs, and builds only the binary.
deps-run:
	@scripts/install-deps.sh run

release: deps-run
	@cmake --preset release >/dev/null
	@cmake --build --preset release --target keel

asan: deps
	@cmake --preset debug-asan >/dev/null
	@cmake --build --preset debug-asan

# The fuzz targets need clang; without it the fuzz tests are reported as skipped by `make test`.
fuzz-build: deps
	@if command -v $(CLANG_CXX) >/dev/null; then \
	  cmake --preset fuzz >/dev/null && cmake --build --preset fuzz; \
	else echo "fuzz-build: $(CLANG_CXX) not found; fuzz targets not built" >&2; fi

fuzz: fuzz-build
	@command -v $(CLANG_CXX) >/dev/null || { echo "make fuzz needs $(CLANG_CXX)" >&2; exit 1; }
	tests/fuzz/fuzz_all.sh build/fuzz $(FUZZ_SECONDS)

tsan-core-build: deps
	@cmake --preset tsan >/dev/null
	@cmake --build --preset tsan-core

tsan: deps
	@cmake --preset tsan >/dev/null
	@cmake --build --preset tsan
	ctest --preset tsan

run: release
	./build/release/tools/keel serve $(ARGS)

test: deps format-check asan fuzz-build tsan-core-build
	scripts/run_tests.sh debug-asan fuzz tsan-core

format:
	@scripts/format.sh fix

format-check: deps
	@scripts/format.sh check

clean:
	rm -rf build
