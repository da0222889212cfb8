#!/usr/bin/env bash
# semi-PD against colocated serving (issue 15, part 4's skeleton): `keel bench-serve` on one
# Poisson trace per rate against `keel serve` in each configuration, on the same cores. SLOs = 5x
# the single-request TTFT and TPOT measured at the start of the run on the colocated server
# (bench-serve at concurrency 1). Per configuration and rate: P90 TTFT, P90 TPOT and SLO
# attainment (goodput / request throughput). Configurations: colocated (-t CORES, chunked
# prefill as by default), static semi-PD 1,1 and CORES,CORES (overlapping), and dynamic semi-PD
# from 1,1 (--semi-pd-dynamic with the same SLOs, x + y <= 2·CORES, a 500 ms window; its final
# split is printed from /metrics). Not yet: 1P1D from `keel cluster`.
#   bench/semi_pd.sh [--model GGUF] [--rates "2 4 8"] [--num-prompts N] [--quick]
# Defaults: ../shared/models/stories260K/stories260K.gguf, build/release/tools/keel. Every server
# is started on a free port and stopped by PID (bench/lib/processes.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
KEEL=${KEEL:-build/release/tools/keel}
MODEL=../shared/models/stories260K/stories260K.gguf
RATES="20 40 80 160"
N=200
INPUT=128
OUTPUT=64
while [ $# -gt 0 ]; do
  case $1 in
    --model) MODEL=$2; shift ;;
    --rates) RATES=$2; shift ;;
    --num-prompts) N=$2; shift ;;
    --quick) N=60; RATES="40 160" ;;
    *) echo "semi_pd.sh: unknown flag $1" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$KEEL" ] || { echo "semi_pd.sh: build keel first (make release)" >&2; exit 1; }
source bench/lib/processes.sh
OUT=$(mktemp -d /tmp/keel-semi-pd-bench.XXXXXX)
CORES=$(nproc)
common=(--input-len $INPUT --output-len $OUTPUT --ignore-eos --seed 1 --skip-test-request
        --vocab-size 512 --metric-percentiles 90)

# Single-request SLO base on the colocated server.
start_keel "$OUT/base.log" serve -m "$MODEL" -t "$CORES"
"$KEEL" bench-serve --base-url "http://127.0.0.1:$port" --num-prompts 10 --max-concurrency 1 \
  "${common[@]}" --save-result "$OUT/base.json" > /dev/null
stop "$SRV"
read -r SLO_TTFT SLO_TPOT < <(python3 -c "
import json; r = json.load(open('$OUT/base.json'))
print(5 * r['mean_ttft_ms'], 5 * r['mean_tpot_ms'])")
echo "SLOs (5x single request on colocated -t $CORES): TTFT $SLO_TTFT ms, TPOT $SLO_TPOT ms"

configs=("colocated|-t $CORES" "semi-pd 1,1|--mode semi-pd --semi-pd-split 1,1"
         "semi-pd $CORES,$CORES|--mode semi-pd --semi-pd-split $CORES,$CORES"
         "semi-pd dynamic|--mode semi-pd --semi-pd-split 1,1 --semi-pd-dynamic
          --semi-pd-ttft-slo-ms $SLO_TTFT --semi-pd-tpot-slo-ms $SLO_TPOT --semi-pd-window-ms 500
          --semi-pd-max-cores $((2 * CORES))")
echo "| configuration | rate (req/s) | P90 TTFT (ms) | P90 TPOT (ms) | SLO attainment |"
echo "|---|---:|---:|---:|---:|"
for c in "${configs[@]}"; do
  name=${c%%|*}
  read -r -d '' -a flags <<< "${c#*|}" || true
  start_keel "$OUT/serve.log" serve -m "$MODEL" "${flags[@]}"
  for rate in $RATES; do
    f="$OUT/${name// /_}-$rate.json"
    "$KEEL" bench-serve --base-url "http://127.0.0.1:$port" --num-prompts "$N" \
      --request-rate "$rate" "${common[@]}" --goodput "ttft:$SLO_TTFT" "tpot:$SLO_TPOT" \
      --save-result "$f" > /dev/null
    python3 - "$f" "$name" "$rate" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
att = (r["request_goodput"] or 0) / r["request_throughput"] if r["request_throughput"] else 0
print(f"| {sys.argv[2]} | {sys.argv[3]} | {r['p90_ttft_ms']:.2f} | {r['p90_tpot_ms']:.3f} | "
      f"{100 * att:.0f} % ({r['completed']} ok, {r['failed']} failed) |")
PY
  done
  if [ "$name" = "semi-pd dynamic" ]; then
    curl -s "http://127.0.0.1:$port/metrics" | grep -E '^keel:semi_pd_(split|decisions)' |
      sed 's/{model_name="[^"]*",\?/{/' | tr '\n' ' ' | sed 's/^/dynamic, at the end: /'
    echo
  fi
  stop "$SRV"
done
rm -rf "$OUT"
