#!/usr/bin/env bash
# The autoscaler end to end (docs/benchmarks.md, "Autoscaling"): `keel cluster up --min 0 --max 3
# --warm-pool 2 --store-dir` under a `keel bench-serve` ramp, no scaling asked for by hand.
#   1. scale from zero: the first request of an idle cluster (no TE bound) is held at the gateway
#      while the autoscaler binds a warm TE; its TTFT (curl, streamed: time to the first byte of
#      the first token's event) against a second request once the TE is up;
#   2. a ramp: bench-serve at 1, 2, 4, 8 and 12 requests in flight (target 2 per TE), then idle;
#      the replicas over time (the gateway's keel:autoscaler_desired_replicas and
#      keel:autoscaler_ready_replicas sampled every 0.5 s) until the fleet is back at zero;
#   3. the event log's autoscale decisions (time, current → desired, reason) and drains.
# Usage: bench/autoscale.sh [--model GGUF] [--out DIR] [--stable S] [--grace S]
# Defaults: ../shared/models/stories260K/stories260K.gguf, build/release/tools/keel, stable window
# 6 s (panic 0.6 s), grace 6 s. Every process started here is stopped by PID on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
KEEL=${KEEL:-build/release/tools/keel}
MODEL=../shared/models/stories260K/stories260K.gguf
OUT=$(mktemp -d /tmp/keel-autoscale-bench.XXXXXX)
STABLE=6
GRACE=6
while [ $# -gt 0 ]; do
  case $1 in
    --model) MODEL=$2; shift ;;
    --out) OUT=$2; shift ;;
    --stable) STABLE=$2; shift ;;
    --grace) GRACE=$2; shift ;;
    *) echo "autoscale.sh: unknown flag $1" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$KEEL" ] || { echo "autoscale.sh: build keel first (make release)" >&2; exit 1; }
command -v python3 > /dev/null || { echo "autoscale.sh: needs python3" >&2; exit 1; }
mkdir -p "$OUT"
source bench/lib/processes.sh
STORE=$(mktemp -d /dev/shm/keel-autoscale-store.XXXXXX)
trap 'cleanup; rm -rf "$STORE"' EXIT
metric() {  # $1 metric name: the sum of its samples at the gateway
  curl -s "http://127.0.0.1:$port/metrics" |
    awk -v n="$1" 'index($0, n) == 1 { split($0, a, " "); s += a[2] } END { print s + 0 }'
}
ttft() {  # one streamed completion: seconds to its first byte of body
  curl -s -o /dev/null -w '%{time_starttransfer}' "http://127.0.0.1:$port/v1/completions" \
    -H 'Content-Type: application/json' \
    -d '{"prompt": "Once upon a time", "max_tokens": 16, "stream": true}'
}

start_keel "$OUT/cluster.log" cluster up -m "$MODEL" --min 0 --max 3 --warm-pool 2 \
  --store-dir "$STORE" --threads-per-te 1 --target-concurrency 2 --stable-window "$STABLE" \
  --scale-to-zero-grace "$GRACE" --activation-timeout 60 --event-log "$OUT/events.jsonl"
t_start=$(date +%s.%N)
( while true; do
    echo "$(python3 -c "import time; print(f'{time.time() - $t_start:.1f}')") \
$(metric keel:autoscaler_desired_replicas) $(metric keel:autoscaler_ready_replicas)"
    sleep 0.5
  done ) > "$OUT/replicas.txt" 2> /dev/null &
PIDS+=("$!")

echo "== 1. scale from zero =="
echo "ready replicas before: $(metric keel:autoscaler_ready_replicas)"
cold=$(ttft)
warm=$(ttft)
echo "first request from zero TEs: TTFT ${cold} s; next request: TTFT ${warm} s"

echo "== 2. ramp =="
for c in 1 2 4 8 12; do
  "$KEEL" bench-serve --base-url "http://127.0.0.1:$port" --endpoint /v1/completions \
    --prompt-format token-ids --min-token-id 3 --vocab-size 512 --seed "$c" --ignore-eos \
    --input-len 64 --output-len 128 --num-prompts $((c * 8)) --max-concurrency "$c" \
    --skip-test-request --save-result "$OUT/ramp-$c.json" > "$OUT/ramp-$c.log" 2>&1
  python3 - "$OUT/ramp-$c.json" "$c" "$(metric keel:autoscaler_ready_replicas)" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"in flight {sys.argv[2]:>2}: {j['completed']} done, {j['failed']} failed, "
      f"{j['request_throughput']:.1f} req/s, TTFT p50 {j['median_ttft_ms']:.1f} ms, "
      f"TPOT p50 {j['median_tpot_ms']:.2f} ms; ready TEs after: {sys.argv[3]}")
PY
done
t_idle=$(date +%s.%N)
for _ in $(seq 1 240); do
  [ "$(metric keel:autoscaler_ready_replicas)" = 0 ] && break
  sleep 0.5
done
echo "back at zero TEs $(python3 -c "print(f'{$(date +%s.%N) - $t_idle:.1f}')") s after the ramp"

echo "== 3. decisions =="
python3 - "$OUT/events.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["event"] == "autoscale":
        s = e["signals"]
        print(f"t={e['t_s']:6.1f} s  {e['current']} -> {e['desired']}  {e['reason']:<20} "
              f"concurrency {s['concurrency']:.0f} (stable {s['stable_concurrency']:.1f}, "
              f"panic {s['panic_concurrency']:.1f}) held {s['held']}")
    elif e["event"] == "drain" and e["phase"] == "stopped":
        print(f"t={e['t_s']:6.1f} s  drained {e['te']} ({e['outcome']}, {e['drain_s']:.2f} s)")
    elif e["event"] == "scale_out":
        print(f"          bound {e['te']} (decision to ready {e['ready_s']:.3f} s)")
PY
echo "replicas over time (t desired ready): $OUT/replicas.txt"
awk 'NR % 4 == 1' "$OUT/replicas.txt" | tr '\n' ';' | sed 's/;/; /g'
echo
