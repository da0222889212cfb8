#!/usr/bin/env bash
# Expert parallelism on one host (issue 35, item 5): `keel serve` on an MoE model as one process
# and as `--ep 2` (this process: attention, routers, half the experts; a `keel ep-expert` child:
# the other half, over shared memory), overlap on and off. For each: resident memory of each
# process once loaded (VmRSS), then ROUNDS greedy streams of N tokens (decode t/s between the first
# and last token, time to first token), and — from the leader's log at exit — the exchange time
# (round trip minus the member's compute), how long the leader waited for its member, and the part
# of that wait the member's compute does not explain (the exchange left exposed).
#
#   bench/moe_ep.sh [--shape qwen3moe-small] [--type q4_0] [--rounds 3] [--tokens 128] [--remote]
# Threads: the single process runs -t 1 and -t 2; the EP leader and its member -t 1 each (two
# cores in all). Needs build/release (make release) and python3.
# --remote (root): also the member on "another host" — a network namespace joined to this one by a
# veth pair, `keel ep-expert --listen` there and `keel serve --ep 2 --ep-remote` here, so the
# exchange crosses a network link over UCX (TCP) instead of shared memory.
set -euo pipefail
cd "$(dirname "$0")/.."

SHAPE=qwen3moe-small
TYPE=q4_0
ROUNDS=3
TOKENS=128
REMOTE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --shape) SHAPE="$2"; shift ;;
    --type) TYPE="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --tokens) TOKENS="$2"; shift ;;
    --remote) REMOTE=1 ;;
    *) echo "usage: $0 [--shape S] [--type T] [--rounds N] [--tokens N] [--remote]" >&2; exit 2 ;;
  esac
  shift
done

KEEL=${KEEL:-build/release/tools/keel}
VOCAB=${VOCAB:-../shared/vocab/ggml-vocab-llama-spm.gguf}
MODELS=${MODELS:-/tmp/keel-moe-vs-llama}
OUT=${OUT:-$(mktemp -d /tmp/keel-moe-ep.XXXX)}
mkdir -p "$MODELS" "$OUT"
source bench/lib/processes.sh
source bench/lib/ep_netns.sh
M="$MODELS/$SHAPE-$TYPE.gguf"
[ -e "$M" ] || "$KEEL" make-model --shape "$SHAPE" --type "$TYPE" --vocab "$VOCAB" -o "$M"

rss_mb() { awk '/VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }

run_config() {  # NAME ARGS...
  local name=$1
  shift
  start_keel "$OUT/$name.log" serve -m "$M" --max-num-seqs 1 "$@"
  local member
  member=$(sed -n 's/.*expert member 1 (pid \([0-9]*\)) ready.*/\1/p' "$OUT/$name.log" | head -1)
  grep -q "expert member 1 (10.214" "$OUT/$name.log" && member=$REMOTE_PID
  local rss_leader rss_member="-"
  rss_leader=$(rss_mb "$SRV")
  [ -n "$member" ] && rss_member=$(rss_mb "$member")
  python3 bench/lib/stream_decode.py "$port" 8 > /dev/null  # warm-up
  for r in $(seq 1 "$ROUNDS"); do
    python3 bench/lib/stream_decode.py "$port" "$TOKENS" > "$OUT/$name-r$r.json"
  done
  stop "$SRV"
  echo "$name $rss_leader $rss_member" >> "$OUT/rss.txt"
}

: > "$OUT/rss.txt"
run_config single-t1 -t 1
run_config single-t2 -t 2
run_config ep2-overlap -t 1 --ep 2 --ep-overlap true
run_config ep2-no-overlap -t 1 --ep 2 --ep-overlap false
CONFIGS="single-t1 single-t2 ep2-overlap ep2-no-overlap"
if [ "$REMOTE" = 1 ]; then  # the member in a namespace behind a veth pair: another "host"
  start_netns_member keel-epb 10.214
  run_config ep2-remote-overlap -t 1 --ep 2 --ep-remote "$REMOTE_ADDR" --ep-overlap true
  run_config ep2-remote-no-overlap -t 1 --ep 2 --ep-remote "$REMOTE_ADDR" --ep-overlap false
  CONFIGS="$CONFIGS ep2-remote-overlap ep2-remote-no-overlap"
fi

python3 - "$OUT" "$SHAPE" "$TYPE" "$TOKENS" "$CONFIGS" <<'PY'
import glob, json, os, re, sys
out, shape, typ, tokens, configs = sys.argv[1:6]
rss = {l.split()[0]: l.split()[1:] for l in open(os.path.join(out, "rss.txt"))}
print(f"| {shape} {typ}, tg{tokens} | decode t/s (best) | TTFT s (best) | RSS leader MB | RSS member MB | exchange s | waited s | exposed s | remote calls |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for name in configs.split():
    runs = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, f"{name}-r*.json")))]
    log = open(os.path.join(out, f"{name}.log")).read()
    m = re.search(r"(\d+) remote calls, \d+ slots; round trip ([\d.]+) s, member compute ([\d.]+) s, "
                  r"exchange ([\d.]+) s, waited in collect ([\d.]+) s, exchange exposed ([\d.]+) s", log)
    ex = f"{float(m.group(4)):.3f}" if m else "-"
    wt = f"{float(m.group(5)):.3f}" if m else "-"
    calls = m.group(1) if m else "-"
    xp = f"{float(m.group(6)):.3f}" if m else "-"
    print(f"| {name} | {max(r['decode_tps'] for r in runs):.1f} | {min(r['ttft_s'] for r in runs):.3f} | "
          f"{rss[name][0]} | {rss[name][1]} | {ex} | {wt} | {xp} | {calls} |")
print(f"raw results: {out}")
PY
