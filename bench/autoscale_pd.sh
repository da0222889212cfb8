#!/usr/bin/env bash
# The per-role autoscaler end to end (docs/benchmarks.md, "Autoscaling per role"): a PD fleet,
# `keel cluster up --prefill 1 --decode 1 --max-prefill 3 --max-decode 3 --warm-pool 2
# --store-dir`, under two loads in turn, no scaling asked for by hand:
#   1. decode-heavy: short prompts (16 tokens), long answers (256), 12 in flight;
#   2. prefill-heavy: long prompts (448 tokens), 2-token answers, 12 in flight;
# each followed by an idle wait until both roles are back at their minimum (1). Printed: each
# phase's bench-serve summary and the replicas per role after it, then the event log's decisions
# per role (time, current → desired, reason, the group's concurrency) and drains.
# Usage: bench/autoscale_pd.sh [--model GGUF] [--out DIR] [--stable S]
# Defaults: ../shared/models/stories260K/stories260K.gguf (context 512), build/release/tools/keel,
# stable window 4 s (panic 0.4 s). Every process started here is stopped by PID on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
KEEL=${KEEL:-build/release/tools/keel}
MODEL=../shared/models/stories260K/stories260K.gguf
OUT=$(mktemp -d /tmp/keel-autoscale-pd-bench.XXXXXX)
STABLE=4
while [ $# -gt 0 ]; do
  case $1 in
    --model) MODEL=$2; shift ;;
    --out) OUT=$2; shift ;;
    --stable) STABLE=$2; shift ;;
    *) echo "autoscale_pd.sh: unknown flag $1" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$KEEL" ] || { echo "autoscale_pd.sh: build keel first (make release)" >&2; exit 1; }
command -v python3 > /dev/null || { echo "autoscale_pd.sh: needs python3" >&2; exit 1; }
mkdir -p "$OUT"
source bench/lib/processes.sh
STORE=$(mktemp -d /dev/shm/keel-autoscale-pd-store.XXXXXX)
trap 'cleanup; rm -rf "$STORE"' EXIT
ready() {  # $1 role: the gateway's keel:autoscaler_ready_replicas for it
  curl -s "http://127.0.0.1:$port/metrics" | awk -v r="role=\"$1\"" \
    'index($0, "keel:autoscaler_ready_replicas") == 1 && index($0, r) { print $2 }'
}

start_keel "$OUT/cluster.log" cluster up -m "$MODEL" --prefill 1 --decode 1 --max-prefill 3 \
  --max-decode 3 --warm-pool 2 --store-dir "$STORE" --threads-per-te 1 -c 512 \
  --target-concurrency 2 --stable-window "$STABLE" --event-log "$OUT/events.jsonl"

phase() {  # $1 name, $2 input tokens, $3 output tokens
  "$KEEL" bench-serve --base-url "http://127.0.0.1:$port" --endpoint /v1/completions \
    --prompt-format token-ids --min-token-id 3 --vocab-size 512 --seed 7 --ignore-eos \
    --input-len "$2" --output-len "$3" --num-prompts 240 --max-concurrency 12 \
    --skip-test-request --save-result "$OUT/$1.json" > "$OUT/$1.log" 2>&1
  python3 - "$OUT/$1.json" "$1" "$(ready prefill)" "$(ready decode)" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]}: {j['completed']} done, {j['failed']} failed, "
      f"{j['request_throughput']:.1f} req/s, TTFT p50 {j['median_ttft_ms']:.1f} ms, "
      f"TPOT p50 {j['median_tpot_ms']:.2f} ms; ready after: {sys.argv[3]} prefill, "
      f"{sys.argv[4]} decode")
PY
  local t0
  t0=$(date +%s.%N)
  for _ in $(seq 1 240); do
    [ "$(ready prefill)" = 1 ] && [ "$(ready decode)" = 1 ] && break
    sleep 0.5
  done
  echo "  back at 1 prefill + 1 decode $(python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')") s later"
}
echo "== 1. decode-heavy ==" && phase decode-heavy 16 256
echo "== 2. prefill-heavy ==" && phase prefill-heavy 448 2

echo "== decisions per role =="
python3 - "$OUT/events.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["event"] == "autoscale":
        s = e["signals"]
        print(f"t={e['t_s']:6.1f} s  {e['role']:<7} {e['current']} -> {e['desired']}  "
              f"{e['reason']:<16} concurrency {s['concurrency']:.0f} "
              f"(stable {s['stable_concurrency']:.1f}, panic {s['panic_concurrency']:.1f})")
    elif e["event"] == "drain" and e["phase"] == "stopped":
        print(f"t={e['t_s']:6.1f} s  {e['role']:<7} drained {e['te']} ({e['outcome']}, "
              f"{e['drain_s']:.2f} s)")
    elif e["event"] == "scale_out":
        print(f"          {e['role']:<7} bound {e['te']} (decision to ready {e['ready_s']:.3f} s)")
PY
