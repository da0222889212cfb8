# The two set-up commands of the README, plus helpers. Both install what they need first.
#   make run    build (Release) and serve the OpenAI API (keel serve $(ARGS))
#   make test   build (Debug + ASan/UBSan), check formatting, run every test
.PHONY: run test deps release asan format format-check clean

ARGS ?=

deps:
	@scripts/install-deps.sh

release: deps
	@cmake --preset release >/dev/null
	@cmake --build --preset release --target keel

asan: deps
	@cmake --preset debug-asan >/dev/null
	@cmake --build --preset debug-asan

run: release
	./build/release/tools/keel serve $(ARGS)

test: deps format-check asan
	ctest --preset debug-asan

format:
	@scripts/format.sh fix

format-check: deps
	@scripts/format.sh check

clean:
	rm -rf build
