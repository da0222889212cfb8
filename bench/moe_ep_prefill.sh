#!/usr/bin/env bash
# Expert parallelism under a prefill-heavy load (issue 35 item 5): `keel serve --ep 2` as it is
# (two ping-pong micro-batches), with `--ep-ping-pong false` (one batch: the leader's attention does
# not overlap the member's experts), and with hot experts replicated (`--ep-replicas R --ep-counts
# FILE`, FILE a /metrics scrape of a single-process run of the same kind of load). For each,
# alternated over ROUNDS: the wall time of N prompts of W words, C at a time, 16 tokens each (no
# prefix cache), and from the leader's log the exchange left exposed, the plan's effect (busiest
# process's share of a layer's tokens over the mean, worst layer) and the slots each computed.
#
#   bench/moe_ep_prefill.sh [--shape qwen3moe-small] [--type q4_0] [--replicas 8] [--rounds 2]
#                           [--remote]
# --remote (root): instead, the member on "another host" — `keel ep-expert --listen` in a network
# namespace joined to this one by a veth pair, reached over UCX (TCP) with `--ep-remote` — and only
# ping-pong against one batch (the exchange a network link costs is what ping-pong hides).
# Two cores: the EP leader and its member -t 1 each. Needs build/release (make release), python3.
set -euo pipefail
cd "$(dirname "$0")/.."

SHAPE=qwen3moe-small
TYPE=q4_0
REPLICAS=8
ROUNDS=2
REMOTE=0
N=16
C=4
W=200
while [ $# -gt 0 ]; do
  case "$1" in
    --shape) SHAPE="$2"; shift ;;
    --type) TYPE="$2"; shift ;;
    --replicas) REPLICAS="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --remote) REMOTE=1 ;;
    *) echo "usage: $0 [--shape S] [--type T] [--replicas R] [--rounds N] [--remote]" >&2; exit 2 ;;
  esac
  shift
done

KEEL=${KEEL:-build/release/tools/keel}
VOCAB=${VOCAB:-../shared/vocab/ggml-vocab-llama-spm.gguf}
MODELS=${MODELS:-/tmp/keel-moe-vs-llama}
OUT=${OUT:-$(mktemp -d /tmp/keel-moe-ep-prefill.XXXX)}
mkdir -p "$MODELS" "$OUT"
source bench/lib/processes.sh
source bench/lib/ep_netns.sh
M="$MODELS/$SHAPE-$TYPE.gguf"
[ -e "$M" ] || "$KEEL" make-model --shape "$SHAPE" --type "$TYPE" --vocab "$VOCAB" -o "$M"
COMMON=(serve -m "$M" --no-prefix-cache --max-num-seqs "$C")

# The counts: one process, the same kind of load with other prompts (seed 1).
start_keel "$OUT/counts.log" "${COMMON[@]}" -t 2
python3 bench/lib/prefill_load.py "$port" "$N" "$C" "$W" 16 1 > /dev/null
curl -sf "http://127.0.0.1:$port/metrics" > "$OUT/counts.prom"
stop "$SRV"

run() {  # NAME ROUND ARGS...
  local name=$1 round=$2
  shift 2
  start_keel "$OUT/$name-r$round.log" "${COMMON[@]}" -t 1 --ep 2 "$@"
  python3 bench/lib/prefill_load.py "$port" 2 2 "$W" 4 7 > /dev/null  # warm-up
  python3 bench/lib/prefill_load.py "$port" "$N" "$C" "$W" 16 2 > "$OUT/$name-r$round.json"
  stop "$SRV"
}
CONFIGS=(ping-pong one-batch replicas)
EXTRA=()
if [ "$REMOTE" = 1 ]; then  # the member in a namespace behind a veth pair: another "host"
  start_netns_member keel-epp 10.215
  EXTRA=(--ep-remote "$REMOTE_ADDR")
  CONFIGS=(ping-pong one-batch)
fi
for r in $(seq 1 "$ROUNDS"); do
  run ping-pong "$r" "${EXTRA[@]}"
  run one-batch "$r" --ep-ping-pong false "${EXTRA[@]}"
  [ "$REMOTE" = 1 ] || run replicas "$r" --ep-replicas "$REPLICAS" --ep-counts "$OUT/counts.prom"
done

where="on one host"
[ "$REMOTE" = 1 ] && where="member behind a veth link (UCX over TCP)"
echo "# --ep 2, $where: $SHAPE $TYPE, $N prompts of $W words, $C at a time, 16 tokens"
echo "| config | round | wall s | prompt tok/s | exposed s / exchange s | slots leader / member | plan (worst layer) |"
echo "|---|---|---|---|---|---|---|"
for r in $(seq 1 "$ROUNDS"); do
  for name in "${CONFIGS[@]}"; do
    python3 - "$OUT/$name-r$r.json" "$OUT/$name-r$r.log" "$name" "$r" << 'PY'
import json, re, sys
j = json.load(open(sys.argv[1]))
log = open(sys.argv[2]).read()
m = re.search(r"each member: ([0-9]+) / ([0-9]+)", log)
slots = f"{m[1]} / {m[2]}" if m else "?"
p = re.search(r"worst layer: ([0-9.]+) → ([0-9.]+)", log)
plan = f"{p[1]} → {p[2]}" if p else "-"
x = re.search(r"exchange ([0-9.]+) s, waited in collect [0-9.]+ s, exchange exposed ([0-9.]+) s", log)
exch = f"{x[2]} / {x[1]}" if x else "?"
print(f"| {sys.argv[3]} | {sys.argv[4]} | {j['wall_s']:.2f} | {j['prompt_tokens'] / j['wall_s']:.0f} "
      f"| {exch} | {slots} | {plan} |")
PY
  done
done
echo "raw: $OUT"
