#!/usr/bin/env bash
# Exposed KV-handoff time of PD-disaggregated serving (docs/benchmarks.md, "KV handoff"): one
# prefill TE and one decode TE (`keel cluster up --prefill 1 --decode 1`) of a TinyLlama-1.1B-shaped
# model, 2K-token prompts one at a time, once with the streamed handoff (--kv-handoff stream: each
# chunk's blocks are sent while the next chunk computes) and once with the copy after prefill
# (--kv-handoff after). The prefill TE logs, per job, the time from the end of the prefill's last
# step to the flush of the last block to the decode TE (`kv_handoff ... exposed_ms=`); this prints
# the p50 of each mode and the stream/after ratio.
# Usage: bench/kv_handoff.sh [--prompts N] [--input-len T] [--chunk C] [--type q4_0|q8_0] [--out DIR]
# The model is made once and cached under /tmp (keel make-model). build/release/tools/keel by
# default (KEEL=...). Every process started here is stopped by PID on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
KEEL=${KEEL:-build/release/tools/keel}
OUT=$(mktemp -d /tmp/keel-kv-handoff.XXXXXX)
PROMPTS=5 INPUT=2048 CHUNK=256 TYPE=q4_0 THREADS=2
while [ $# -gt 0 ]; do
  case $1 in
    --prompts) PROMPTS=$2; shift ;;
    --input-len) INPUT=$2; shift ;;
    --chunk) CHUNK=$2; shift ;;
    --type) TYPE=$2; shift ;;
    --threads-per-te) THREADS=$2; shift ;;
    --out) OUT=$2; shift ;;
    *) echo "kv_handoff.sh: unknown flag $1" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$KEEL" ] || { echo "kv_handoff.sh: build keel first (make release)" >&2; exit 1; }
command -v python3 > /dev/null || { echo "kv_handoff.sh: needs python3" >&2; exit 1; }
mkdir -p "$OUT"
MODEL=/tmp/keel-tinyllama-1.1b-$TYPE-ctx4096.gguf
CTX=4096
HEALTH_TRIES=600
source bench/lib/processes.sh  # (the script runs from the repo root)

if [ ! -s "$MODEL" ]; then
  echo "== making $MODEL =="
  "$KEEL" make-model --shape tinyllama-1.1b --type "$TYPE" --ctx "$CTX" -o "$MODEL.tmp"
  mv "$MODEL.tmp" "$MODEL"
fi

for mode in stream after; do
  echo "== --kv-handoff $mode: $PROMPTS prompts of $INPUT tokens, prefill chunks of $CHUNK =="
  start_keel "$OUT/cluster-$mode.log" cluster up -m "$MODEL" --prefill 1 --decode 1 \
    --threads-per-te "$THREADS" -c "$CTX" --kv-handoff "$mode" --prefill-chunk "$CHUNK" \
    --start-timeout 600 --stall-timeout-ms 120000
  "$KEEL" bench-serve --base-url "http://127.0.0.1:$port" --endpoint /v1/completions \
    --prompt-format token-ids --min-token-id 3 --vocab-size 32000 --seed 1 --ignore-eos \
    --skip-test-request \
    --workload random --input-len "$INPUT" --output-len 2 --num-prompts "$PROMPTS" \
    --max-concurrency 1 --save-result "$OUT/bench-$mode.json" > "$OUT/bench-$mode.log" 2>&1
  sleep 1  # the last handoff's log line
  stop "$SRV"
done

python3 - "$OUT" "$INPUT" "$CHUNK" <<'PY'
import re, statistics, sys
out, input_len, chunk = sys.argv[1], sys.argv[2], sys.argv[3]
pat = re.compile(r"kv_handoff job=\S+ mode=(\w+) blocks=(\d+) streamed=(\d+) bytes=(\d+) "
                 r"exposed_ms=([0-9.]+)")
rows = {}
for mode in ("stream", "after"):
    recs = [m.groups() for m in map(pat.search, open(f"{out}/cluster-{mode}.log")) if m]
    if not recs:
        sys.exit(f"kv_handoff.sh: no kv_handoff lines in {out}/cluster-{mode}.log")
    exposed = [float(r[4]) for r in recs]
    rows[mode] = (statistics.median(exposed), min(exposed), max(exposed), int(recs[0][1]),
                  statistics.median(int(r[2]) for r in recs), int(recs[0][3]), len(recs))
print(f"\n| --kv-handoff ({input_len}-token prompts, chunks of {chunk}) | exposed p50 ms "
      "| min–max ms | blocks | of which from the tap | MB | handoffs |")
print("|---|---|---|---|---|---|---|")
for mode, (p50, lo, hi, blocks, streamed, nbytes, n) in rows.items():
    print(f"| {mode} | {p50:.1f} | {lo:.1f}–{hi:.1f} | {blocks} | {streamed:.0f} | "
          f"{nbytes / 1e6:.1f} | {n} |")
print(f"| **ratio** stream / after | **{rows['stream'][0] / rows['after'][0]:.3f}** | | | | | |")
PY
echo "(raw results in $OUT)"
