#!/usr/bin/env bash
# The test half of `make test`: runs the CTest presets named on the command line (all of them,
# even after one fails), then prints one summary — tests passed, failed and skipped, each skip
# with its reason: the GTEST_SKIP message, or the "skipped: ..." line a script test printed
# before exiting 77. A preset that cannot run here (the fuzz targets without clang++-15) is
# counted as skipped too, with its reason. Exit status: 1 when any test failed.
# Usage: scripts/run_tests.sh PRESET... [-- CTEST_ARGS...]   (e.g. -- -E _NOT_BUILT to skip the
#        placeholders of test binaries a partial build did not make)
set -uo pipefail
cd "$(dirname "$0")/.."
presets=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do presets+=("$1"); shift; done
[ $# -gt 0 ] && shift
ctest_args=("$@")

total=0 failed=0 skipped=0 status=0
reasons="$(mktemp)"
trap 'rm -f "$reasons"' EXIT

for preset in "${presets[@]}"; do
  dir="build/$preset"
  [ "$preset" = tsan-core ] && dir=build/tsan
  if [ "$preset" = fuzz ] && ! command -v clang++-15 >/dev/null; then
    n=$(grep -c '^keel_add_fuzz(' tests/fuzz/CMakeLists.txt)
    skipped=$((skipped + n)) total=$((total + n))
    for _ in $(seq "$n"); do echo "fuzz targets: clang++-15 not found (scripts/install-deps.sh installs it)"; done >>"$reasons"
    continue
  fi
  echo "=== ctest --preset $preset"
  out="$dir/ctest-summary.out"
  ctest --preset "$preset" "${ctest_args[@]}" 2>&1 | tee "$out"
  [ "${PIPESTATUS[0]}" -ne 0 ] && status=1
  line="$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$out" | tail -n 1)"
  if [ -z "$line" ]; then
    echo "run_tests: no result line from ctest --preset $preset" >&2
    status=1
    continue
  fi
  t=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
  f=$(sed -E 's/.*, ([0-9]+) tests? failed.*/\1/' <<<"$line")
  s=$(grep -cE '^\s+[0-9]+ - .* \(Skipped\)$' "$out")
  total=$((total + t)) failed=$((failed + f)) skipped=$((skipped + s))
  # Reasons, from the output of every test that ran (CTest keeps it in LastTest.log).
  awk '/: Skipped$/ { if ((getline nxt) > 0) print nxt; next } /^skipped: / { sub(/^skipped: /, ""); print }' \
    "$dir"/Testing/Temporary/LastTest*.log >>"$reasons" 2>/dev/null
done

echo
echo "make test: $((total - failed - skipped)) passed, $failed failed, $skipped skipped, of $total tests"
if [ "$skipped" -gt 0 ]; then
  echo "skipped, by reason:"
  sort "$reasons" | uniq -c | sort -rn | awk '{ n = $1; $1 = ""; printf "  %4d x%s\n", n, $0 }'
fi
exit $status
