#!/usr/bin/env bash
# Runs one libFuzzer target of tests/fuzz: first replays its committed regression inputs
# (regressions/TARGET/, each a crash found once and since fixed), then fuzzes for SECONDS from its
# seed corpus (corpus/TARGET/, read only) and the work corpus WORK/corpus, where new inputs go.
# Crash inputs are written to WORK/artifacts/. The last line printed is a one-line summary.
# Exit: 0 clean, 77 skipped (the target printed why), anything else a failure.
# Usage: run_fuzz.sh BINARY TARGET SECONDS WORK [more libFuzzer flags]
set -uo pipefail
bin="$1" target="$2" seconds="$3" work="$4"
shift 4
here="$(cd "$(dirname "$0")" && pwd)"
corpus="$here/corpus/$target"
regressions="$here/regressions/$target"
mkdir -p "$work/corpus" "$work/artifacts"
log="$work/fuzz.log"

# libFuzzer exits 77 on a crash by default: CTest would read that as "skipped".
flags=(-error_exitcode=1 -timeout_exitcode=1 -timeout=20 -rss_limit_mb=2560 -print_final_stats=1
       "-artifact_prefix=$work/artifacts/")
symbolizer="$(command -v llvm-symbolizer-15 || command -v llvm-symbolizer || true)"
[ -n "$symbolizer" ] && export ASAN_SYMBOLIZER_PATH="$symbolizer"
case "$target" in
  gguf_fuzz | jinja_fuzz | http_fuzz) flags+=(-max_len=16384) ;;
  *) flags+=(-max_len=4096) ;;
esac
[ -f "$here/dict/$target.dict" ] && flags+=("-dict=$here/dict/$target.dict")
extra_corpora=()
# Real models' chat templates, when the shared data is there, seed the template fuzzer too.
shared="${KEEL_SHARED_DIR:-$here/../../../shared}"
if [ "$target" = jinja_fuzz ] && [ -d "$shared/chat-templates" ]; then
  extra_corpora+=("$shared/chat-templates")
fi

# 1. Every committed regression input, once.
mapfile -t replay < <(find "$regressions" -type f 2>/dev/null | sort)
if [ ${#replay[@]} -gt 0 ]; then
  "$bin" "${flags[@]}" "${replay[@]}" >"$log" 2>&1
  rc=$?
  if [ $rc -eq 77 ]; then grep -m1 '^skipped:' "$log"; exit 77; fi
  if [ $rc -ne 0 ]; then
    tail -n 60 "$log"
    echo "fuzz $target: a regression input fails again (rc $rc); see $log" >&2
    exit 1
  fi
fi

# 2. Fuzzing.
corpora=("$work/corpus" "$corpus")
[ -d "$regressions" ] && corpora+=("$regressions")
corpora+=("${extra_corpora[@]}")
crashes_before="$(find "$work/artifacts" -type f | wc -l)"
"$bin" "${flags[@]}" -max_total_time="$seconds" "$@" "${corpora[@]}" >>"$log" 2>&1
rc=$?
if [ $rc -eq 77 ]; then grep -m1 '^skipped:' "$log"; exit 77; fi
stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
execs="$(stat number_of_executed_units)"
rate="$(stat average_exec_per_sec)"
crashes=$(($(find "$work/artifacts" -type f | wc -l) - crashes_before))
if [ $rc -ne 0 ]; then
  tail -n 80 "$log"
  echo "fuzz $target: FAILED (rc $rc) after ${execs:-?} executions; inputs in $work/artifacts" >&2
  exit 1
fi
echo "fuzz $target: ${execs:-?} executions in ${seconds} s (${rate:-?} exec/s)," \
  "work corpus $(find "$work/corpus" -type f | wc -l) files, ${crashes} new crash inputs"
