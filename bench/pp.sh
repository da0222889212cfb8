#!/bin/bash
# Pipeline parallelism on one machine: `keel bench-serve` (random workload, streamed, greedy)
# against `keel serve` three ways on the same cores — one process with THREADS threads, one with
# THREADS/2 (what each stage gets), and `--pp 2` (two processes of THREADS/2 threads each: stage 0
# with the scheduler and the first half of the layers, stage 1 a `keel pp-stage` child with the
# rest) — interleaved for RUNS rounds so the ratios come from one run. Prints each round's output
# tok/s, mean TTFT and mean TPOT, and the medians with pp ÷ one process. Figures:
# docs/benchmarks.md.
#   bench/pp.sh [MODEL] [RUNS] [THREADS] [CONCURRENCY] [PROMPTS]
# MODEL defaults to /tmp/tl-q4_0.gguf, made (once) with
#   keel make-model --shape tinyllama-1.1b --type q4_0 -o /tmp/tl-q4_0.gguf
set -eu
KEEL=${KEEL:-build/release/tools/keel}
MODEL=${1:-/tmp/tl-q4_0.gguf}
RUNS=${2:-3}
THREADS=${3:-2}
CONC=${4:-4}
PROMPTS=${5:-16}
HALF=$((THREADS / 2 > 0 ? THREADS / 2 : 1))
. "$(dirname "$0")/lib/processes.sh"
[ -f "$MODEL" ] || "$KEEL" make-model --shape tinyllama-1.1b --type q4_0 -o "$MODEL"
OUT=$(mktemp -d /tmp/keel-pp.XXXX)
trap 'cleanup; rm -rf "$OUT"' EXIT

# run NAME SERVE-ARGS...: one server, one bench-serve, the server stopped by PID.
run() {
  local name=$1
  shift
  start_keel "$OUT/$name.log" serve -m "$MODEL" --max-num-seqs "$CONC" "$@"
  "$KEEL" bench-serve --base-url "http://127.0.0.1:$port" --input-len 128 --output-len 64 \
    --num-prompts "$PROMPTS" --max-concurrency "$CONC" --seed 1 \
    --save-result "$OUT/$name.$round.json" > /dev/null
  stop "$SRV"
}
for round in $(seq 1 "$RUNS"); do
  run one -t "$THREADS"
  run half -t "$HALF"
  run pp -t "$HALF" --pp 2
done
python3 - "$OUT" "$RUNS" "$THREADS" "$HALF" <<'PY'
import json, statistics, sys
out, runs, threads, half = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
names = {"one": f"1 process x {threads} threads", "half": f"1 process x {half} threads",
         "pp": f"--pp 2: 2 processes x {half} threads"}
res = {n: [json.load(open(f"{out}/{n}.{r}.json")) for r in range(1, runs + 1)] for n in names}
print("| configuration | output tok/s (median) | mean TTFT ms | mean TPOT ms | rounds (tok/s) |")
print("|---|---|---|---|---|")
med = {}
for n, label in names.items():
    tps = [r["output_throughput"] for r in res[n]]
    med[n] = statistics.median(tps)
    ttft = statistics.median(r["mean_ttft_ms"] for r in res[n])
    tpot = statistics.median(r["mean_tpot_ms"] for r in res[n])
    print(f"| {label} | {med[n]:.2f} | {ttft:.0f} | {tpot:.1f} | "
          + ", ".join(f"{t:.2f}" for t in tps) + " |")
print(f"pp / one process: {med['pp'] / med['one']:.2f}; pp / half: {med['pp'] / med['half']:.2f}")
PY
