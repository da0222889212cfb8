#!/usr/bin/env bash
# semi-PD against colocated and disaggregated serving (issue 15, part 4): `keel bench-serve` on
# one Poisson trace per rate against each configuration, every server process tree pinned with
# taskset to the same CPU set (--cpus, default every core). SLOs = 5x the single-request TTFT and
# TPOT measured at the start of the run on the colocated server (bench-serve at concurrency 1).
# Configurations:
#   colocated      keel serve -t N (chunked prefill, the default --max-batched-tokens)
#   1P1D           keel cluster up --prefill 1 --decode 1 --threads-per-te N/2 (gateway, JE, TEs)
#   semi-PD static keel serve --mode semi-pd --semi-pd-split N/2,N/2
#   semi-PD dyn.   the same from N/2,N/2 with --semi-pd-dynamic (same SLOs, 500 ms window,
#                  x + y <= 2N; its final split and decisions are printed from /metrics)
# (N = the cores of --cpus; N/2 at least 1.) The rates are swept in order for colocated until it
# attains less than 50 % of requests within both SLOs; every other configuration runs the same
# rates. Per configuration and rate: P90 TTFT, P90 TPOT and SLO attainment (goodput / throughput).
#   bench/semi_pd.sh [--model GGUF] [--cpus LIST] [--rates "R1 R2 ..."] [--num-prompts N] [--quick]
# Defaults: ../shared/models/stories260K/stories260K.gguf, build/release/tools/keel, 200 prompts
# of 128 + 64 tokens. --quick: 60 prompts. Every server is started on a free port and stopped by
# PID (bench/lib/processes.sh). Figures: docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
KEEL=${KEEL:-build/release/tools/keel}
MODEL=../shared/models/stories260K/stories260K.gguf
CPUS=0-$(($(nproc) - 1))
RATES="5 10 20 50 100 200 400 800"
N=200
INPUT=128
OUTPUT=64
while [ $# -gt 0 ]; do
  case $1 in
    --model) MODEL=$2; shift ;;
    --cpus) CPUS=$2; shift ;;
    --rates) RATES=$2; shift ;;
    --num-prompts) N=$2; shift ;;
    --quick) N=60 ;;
    *) echo "semi_pd.sh: unknown flag $1" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$KEEL" ] || { echo "semi_pd.sh: build keel first (make release)" >&2; exit 1; }
source bench/lib/processes.sh
OUT=$(mktemp -d /tmp/keel-semi-pd-bench.XXXXXX)
CORES=$(taskset -c "$CPUS" nproc)
HALF=$((CORES / 2 > 0 ? CORES / 2 : 1))
common=(--input-len $INPUT --output-len $OUTPUT --ignore-eos --seed 1 --skip-test-request
        --vocab-size 512 --metric-percentiles 90)

# start_pinned LOG ARGS...: start_keel with the whole process tree on $CPUS (children inherit it).
start_pinned() {
  local log=$1
  shift
  port=$(free_port)
  taskset -c "$CPUS" "$KEEL" "$@" --port "$port" > "$log" 2>&1 &
  SRV=$!
  PIDS+=("$SRV")
  wait_health "$port"
}

# Single-request SLO base on the colocated server.
start_pinned "$OUT/base.log" serve -m "$MODEL" -t "$CORES"
"$KEEL" bench-serve --base-url "http://127.0.0.1:$port" --num-prompts 20 --max-concurrency 1 \
  "${common[@]}" --save-result "$OUT/base.json" > /dev/null 2>> "$OUT/client.log"
stop "$SRV"
read -r BASE_TTFT BASE_TPOT SLO_TTFT SLO_TPOT < <(python3 -c "
import json; r = json.load(open('$OUT/base.json'))
print(r['mean_ttft_ms'], r['mean_tpot_ms'], 5 * r['mean_ttft_ms'], 5 * r['mean_tpot_ms'])")
echo "CPUs $CPUS ($CORES cores); single request on colocated -t $CORES: TTFT $BASE_TTFT ms, TPOT" \
  "$BASE_TPOT ms; SLOs (5x): TTFT $SLO_TTFT ms, TPOT $SLO_TPOT ms"

configs=("colocated|serve -t $CORES"
         "1P1D|cluster up --prefill 1 --decode 1 --threads-per-te $HALF"
         "semi-PD $HALF,$HALF|serve --mode semi-pd --semi-pd-split $HALF,$HALF"
         "semi-PD dynamic|serve --mode semi-pd --semi-pd-split $HALF,$HALF --semi-pd-dynamic
          --semi-pd-ttft-slo-ms $SLO_TTFT --semi-pd-tpot-slo-ms $SLO_TPOT --semi-pd-window-ms 500
          --semi-pd-max-cores $((2 * CORES))")

# run_rate NAME RATE: one Poisson trace; prints the table row and the attainment (percent) on fd 3.
run_rate() {
  local f="$OUT/${1// /_}-$2.json"
  "$KEEL" bench-serve --base-url "http://127.0.0.1:$port" --num-prompts "$N" \
    --request-rate "$2" "${common[@]}" --goodput "ttft:$SLO_TTFT" "tpot:$SLO_TPOT" \
    --save-result "$f" > /dev/null 2>> "$OUT/client.log"
  python3 - "$f" "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
att = (r["request_goodput"] or 0) / r["request_throughput"] if r["request_throughput"] else 0
print(f"| {sys.argv[2]} | {sys.argv[3]} | {r['p90_ttft_ms']:.2f} | {r['p90_tpot_ms']:.3f} | "
      f"{100 * att:.0f} % ({r['completed']} ok, {r['failed']} failed) |")
print(f"{100 * att:.1f}", file=open(sys.argv[1] + ".att", "w"))
PY
}

echo "| configuration | rate (req/s) | P90 TTFT (ms) | P90 TPOT (ms) | SLO attainment |"
echo "|---|---:|---:|---:|---:|"
swept=""
for c in "${configs[@]}"; do
  name=${c%%|*}
  read -r -d '' -a flags <<< "${c#*|}" || true
  start_pinned "$OUT/serve.log" "${flags[@]}" -m "$MODEL"
  if [ -z "$swept" ]; then  # colocated: sweep until it attains < 50 %
    for rate in $RATES; do
      run_rate "$name" "$rate"
      swept="$swept $rate"
      att=$(cat "$OUT/${name// /_}-$rate.json.att")
      python3 -c "import sys; sys.exit(0 if $att < 50 else 1)" && break
    done
  else
    for rate in $swept; do run_rate "$name" "$rate"; done
  fi
  if [ "$name" = "semi-PD dynamic" ]; then
    curl -s "http://127.0.0.1:$port/metrics" | grep -E '^keel:semi_pd_(split|decisions)' |
      sed 's/{model_name="[^"]*",\?/{/' | tr '\n' ' ' | sed 's/^/dynamic, at the end: /'
    echo
  fi
  stop "$SRV"
done
rm -rf "$OUT"
