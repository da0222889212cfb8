#!/usr/bin/env bash
# Program-aware admission on agent programs (docs/agents.md, issue 39 item 3): `keel serve` with
# --program-scheduling plas against fcfs, the same seeded stream of heavy-tailed agent programs
# (bench/lib/agents_load.py: 80 % make 1-2 calls, 20 % make 10-20, each call resending the
# history) offered at LOAD x the measured capacity, rounds alternating the order. Prints one JSON
# row per run and the ratios of the short and long programs' mean completion times.
#
#   bench/agents.sh [--model GGUF] [--load 1.2] [--duration 90] [--rounds 2] [--max-tokens 32]
#                   [--seqs 4]
# Default model: the TinyLlama-shape pay-off fixture (bench/payoff.sh makes it), else stories260K.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=/tmp/keel-payoff/fixture-tinyllama-1.1b-q4_0.gguf
[ -e "$MODEL" ] || MODEL=models/stories260K/stories260K.gguf
LOAD=1.2 DURATION=90 ROUNDS=2 TOKENS=32 SEQS=4
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL="$2"; shift ;;
    --load) LOAD="$2"; shift ;;
    --duration) DURATION="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --max-tokens) TOKENS="$2"; shift ;;
    --seqs) SEQS="$2"; shift ;;
    *) echo "usage: $0 [--model GGUF] [--load X] [--duration S] [--rounds N] [--max-tokens N] [--seqs N]" >&2; exit 2 ;;
  esac
  shift
done
KEEL=${KEEL:-build/release/tools/keel}
OUT=${OUT:-$(mktemp -d /tmp/keel-agents.XXXX)}
mkdir -p "$OUT"
source bench/lib/processes.sh

run() {  # MODE ROUND [CAPACITY]
  start_keel "$OUT/$1-r$2.log" serve -m "$MODEL" -t 2 --max-num-seqs "$SEQS" \
    --program-scheduling "$1"
  local cap_args=()
  [ -n "${3:-}" ] && cap_args=(--capacity "$3")
  python3 bench/lib/agents_load.py "$port" --load "$LOAD" --duration "$DURATION" \
    --max-tokens "$TOKENS" --concurrency "$SEQS" "${cap_args[@]}" | sed "s/^/$1 $2 /" \
    | tee -a "$OUT/rows.txt"
  stop "$SRV"
}

echo "model $MODEL, load $LOAD, $DURATION s of arrivals, $TOKENS tokens per call, $SEQS seqs" \
  | tee "$OUT/rows.txt"
CAP=""
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then order="plas fcfs"; else order="fcfs plas"; fi
  for mode in $order; do
    run "$mode" "$r" "$CAP"
    # Every later run offers the same load: the first run's measured capacity.
    [ -z "$CAP" ] && CAP=$(tail -1 "$OUT/rows.txt" | sed 's/^[a-z]* [0-9]* //' \
      | python3 -c 'import json,sys; print(json.load(sys.stdin)["capacity_calls_per_s"])')
  done
done
python3 - "$OUT/rows.txt" <<'PY'
import json, sys
rows = {}
for line in open(sys.argv[1]).read().splitlines()[1:]:
    mode, rnd, js = line.split(" ", 2)
    rows.setdefault(mode, []).append(json.loads(js))
mean = lambda xs: sum(xs) / len(xs)
for k in ("short_mean_s", "long_mean_s", "calls_per_s"):
    p, f = mean([r[k] for r in rows["plas"]]), mean([r[k] for r in rows["fcfs"]])
    print(f"{k}: plas {p:.2f} fcfs {f:.2f} (fcfs/plas {f / p:.2f}x)")
PY
echo "rows: $OUT/rows.txt"
