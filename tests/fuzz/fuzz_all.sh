#!/usr/bin/env bash
# `make fuzz`: runs every fuzz target of BUILD_DIR (the fuzz preset's) for SECONDS each, one after
# another at the lowest CPU priority, from the seed corpora plus the work corpora that earlier
# runs grew under BUILD_DIR/fuzz-work/long/. Prints one summary line per target and exits non-zero
# when a target crashed (its input is under BUILD_DIR/fuzz-work/long/TARGET/artifacts/).
# Usage: fuzz_all.sh BUILD_DIR SECONDS [TARGET...]
set -uo pipefail
build="$1" seconds="$2"
shift 2
here="$(cd "$(dirname "$0")" && pwd)"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(gguf_fuzz block_file_fuzz sse_fuzz jinja_fuzz tokenizer_spm_fuzz tokenizer_bpe_fuzz
           request_json_fuzz http_fuzz wire_fuzz cluster_messages_fuzz
           kv_event_fuzz kv_transfer_frame_fuzz)
fi
summary="$build/fuzz-work/long/summary.txt"
mkdir -p "$(dirname "$summary")"
: >"$summary"
failed=0
for t in "${targets[@]}"; do
  out="$build/fuzz-work/long/$t.out"
  mkdir -p "$(dirname "$out")"
  nice -n 19 "$here/run_fuzz.sh" "$build/tests/fuzz/$t" "$t" "$seconds" \
    "$build/fuzz-work/long/$t" >"$out" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
    failed=1
    tail -n 40 "$out"
  fi
  tail -n 1 "$out" | tee -a "$summary"
done
echo "summary: $summary"
exit $failed
