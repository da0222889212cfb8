#!/usr/bin/env bash
# Context-parallel prefill across processes (issue 36 item 2), `keel cp-prefill`:
#   1. CP=2 — two member processes of one thread each, their ring over loopback — against one
#      process with two threads (Context::forward over the whole prompt), interleaved rounds; the
#      ratio per round and its median; both must name the same next token.
#   2. --links "1gbit 10gbit": member 1 in a network namespace joined by a veth pair whose both
#      ends are shaped to the rate (tc tbf), overlap on and off, one round each: what the overlap
#      hides = 1 − (exposed wait with overlap) / (exposed wait without), the wait being the time a
#      member spent in the ring's receive and flush (summed over both members), beside the walls.
#
#   bench/cp_prefill.sh [--model GGUF | --shape S] [--tokens N] [--rounds R]
#                       [--links "1gbit 10gbit"] [--link-tokens N] [--out DIR]
# Default: llama-3.2-1b Q4_0 random weights, 8192 tokens, 3 rounds, no links. --links needs root
# (ip netns, tc). Every process started is stopped by PID on exit; namespaces and links removed.
set -euo pipefail
cd "$(dirname "$0")/.."

SHAPE=llama-3.2-1b
MODEL=""
TOKENS=8192
ROUNDS=3
LINKS=""
LINK_TOKENS=""
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL="$2"; shift ;;
    --shape) SHAPE="$2"; shift ;;
    --tokens) TOKENS="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --links) LINKS="$2"; shift ;;
    --link-tokens) LINK_TOKENS="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    *) echo "usage: $0 [--model GGUF | --shape S] [--tokens N] [--rounds R] [--links \"1gbit 10gbit\"] [--link-tokens N] [--out DIR]" >&2
       exit 2 ;;
  esac
  shift
done
KEEL=${KEEL:-build/release/tools/keel}
[ -x "$KEEL" ] || { echo "cp_prefill: missing $KEEL (make release)" >&2; exit 1; }
OUT=${OUT:-$(mktemp -d /tmp/keel-cp-prefill.XXXX)}
LINK_TOKENS=${LINK_TOKENS:-$TOKENS}
mkdir -p "$OUT"
if [ -z "$MODEL" ]; then
  MODEL=/tmp/keel-long/$SHAPE-q4_0.gguf
  mkdir -p /tmp/keel-long
  [ -e "$MODEL" ] || "$KEEL" make-model --shape "$SHAPE" --type q4_0 -o "$MODEL" > /dev/null
fi
source bench/lib/processes.sh

# run_pair NAME TOKENS [NS HOST0 HOST1] [extra flags…]: members 0 (here) and 1 (in NS, or here)
# of a CP=2 prefill; their JSON lines in $OUT/NAME-0.json and NAME-1.json.
run_pair() {
  local name=$1 tokens=$2 ns=$3 h0=$4 h1=$5
  shift 5
  local flags=(-m "$MODEL" --cp 2 --tokens "$tokens" -t 1 --timeout 900 "$@")
  "$KEEL" cp-prefill "${flags[@]}" --rank 0 --listen "$h0:0" > "$OUT/$name-0.json" \
    2> "$OUT/$name-0.log" &
  local p0=$!
  PIDS+=("$p0")
  for _ in $(seq 1 600); do grep -q KEEL_READY "$OUT/$name-0.json" && break; sleep 0.1; done
  local port
  port=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$OUT/$name-0.json" | head -1)
  local pre=()
  [ -n "$ns" ] && pre=(ip netns exec "$ns")
  "${pre[@]}" "$KEEL" cp-prefill "${flags[@]}" --rank 1 --listen "$h1:0" --join "$h0:$port" \
    > "$OUT/$name-1.json" 2> "$OUT/$name-1.log"
  wait "$p0"
}

for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r: one process (2 threads), then CP=2 (1 thread each), $TOKENS tokens"
  "$KEEL" cp-prefill -m "$MODEL" --cp 1 --tokens "$TOKENS" -t 2 > "$OUT/alone-r$r.json" \
    2> "$OUT/alone-r$r.log"
  run_pair "cp2-r$r" "$TOKENS" "" 127.0.0.1 127.0.0.1
done

if [ -n "$LINKS" ]; then
  source bench/lib/netns_pair.sh
  make_netns_pair keel-cpb 10.215
  for rate in $LINKS; do
    tc qdisc replace dev "$VA" root tbf rate "$rate" burst 4mb latency 100ms
    ip netns exec "$NS" tc qdisc replace dev "$VB" root tbf rate "$rate" burst 4mb latency 100ms
    for mode in on off; do
      echo "== link $rate, overlap $mode, $LINK_TOKENS tokens"
      extra=()
      [ "$mode" = off ] && extra=(--no-overlap)
      run_pair "link-$rate-$mode" "$LINK_TOKENS" "$NS" "${NET}1" "${NET}2" "${extra[@]}"
    done
  done
fi

python3 - "$OUT" "$ROUNDS" "$LINKS" <<'PY'
import json, statistics, sys
out, rounds, links = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()

def load(path):
    for line in open(path):
        if line.startswith("{"):
            return json.loads(line)
    raise SystemExit(f"cp_prefill: no result in {path}")

ratios = []
print("| round | one process, 2 threads (s) | CP=2, 1 thread each (s) | CP / one process speed | next token |")
print("|---|---:|---:|---:|---|")
for r in range(1, rounds + 1):
    alone = load(f"{out}/alone-r{r}.json")
    m = [load(f"{out}/cp2-r{r}-{i}.json") for i in (0, 1)]
    t1 = alone["rounds"][0]["seconds"]
    t2 = max(x["rounds"][0]["seconds"] for x in m)
    same = "same" if alone["next_token"] == m[0]["next_token"] else \
        f"DIFFERENT ({alone['next_token']} vs {m[0]['next_token']})"
    ratios.append(t1 / t2)
    print(f"| {r} | {t1:.2f} | {t2:.2f} | {t1 / t2:.3f}x | {same} |")
print(f"\nmedian CP=2 / one process: {statistics.median(ratios):.3f}x (target >= 0.85x)")
kv = [load(f"{out}/cp2-r1-{i}.json") for i in (0, 1)]
total = load(f"{out}/alone-r1.json")["kv_bytes"]
pairs = [x["rounds"][0]["attention_pairs"] for x in kv]
print(f"KV bytes per member: {[x['kv_bytes'] for x in kv]} of {total} in one process; "
      f"attention pairs per member: {pairs}")
for rate in links:
    rows = {}
    for mode in ("on", "off"):
        m = [load(f"{out}/link-{rate}-{mode}-{i}.json")["rounds"][0] for i in (0, 1)]
        rows[mode] = (max(x["seconds"] for x in m), sum(x["wait_seconds"] for x in m),
                      sum(x["bytes_sent"] for x in m))
    (won, aon, b), (woff, aoff, _) = rows["on"], rows["off"]
    hidden = 1 - aon / aoff if aoff > 0 else float("nan")
    print(f"link {rate}: wall {won:.2f} s with overlap, {woff:.2f} s without; ring wait "
          f"{aon:.2f} s vs {aoff:.2f} s; {b / 2**20:.0f} MiB sent; hidden {hidden * 100:.0f} % "
          f"(target >= 70 %)")
print(f"\nraw results: {out}")
PY
