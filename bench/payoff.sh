#!/usr/bin/env bash
# Where the seeds' speed techniques are meant to pay off (issue 37): speculation on a weight-bound
# model that writes real text — the `keel make-model --embed` fixture (stories260K's function in a
# TinyLlama-shaped body; docs/benchmarks.md, "The pay-off fixture") — side by side with
# llama-server's own speculation, one run, alternating which server goes first each round.
#
# Rows per round and concurrency (c = 1 and 4, 2 threads each, greedy, 8 story prompts × ROUNDS):
#   keel plain, keel --speculative ngram, keel --speculative draft-head (a head trained on the
#   fixture by `keel train-draft`), keel --draft-model stories260K (stories260K drafting for its
#   own function: an upper bound on a draft model's acceptance);
#   llama-server plain, --spec-type ngram-simple, -md stories260K.
# Each row: completion tokens per second over the wall time, the median per-request decode rate,
# and whether its text equals the same server's plain row (speculation must not change it).
# First the fixture's honesty: file size and `keel bench` tg128 against `keel make-model`'s random
# body of the same shape and type.
#
#   bench/payoff.sh [--shape tinyllama-1.1b] [--type q4_0] [--tokens 160] [--rounds 2] [--k 4]
# Needs build/release (make release), python3 and ../shared/reference/llama.cpp.
set -euo pipefail
cd "$(dirname "$0")/.."

SHAPE=tinyllama-1.1b
TYPE=q4_0
TOKENS=160
ROUNDS=2
K=4
while [ $# -gt 0 ]; do
  case "$1" in
    --shape) SHAPE="$2"; shift ;;
    --type) TYPE="$2"; shift ;;
    --tokens) TOKENS="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --k) K="$2"; shift ;;
    *) echo "usage: $0 [--shape S] [--type T] [--tokens N] [--rounds N] [--k N]" >&2; exit 2 ;;
  esac
  shift
done

KEEL=${KEEL:-build/release/tools/keel}
LLAMA=${LLAMA:-../shared/reference/llama.cpp/bin/llama-server}
SMALL=${SMALL:-models/stories260K/stories260K.gguf}
MODELS=${MODELS:-/tmp/keel-payoff}
OUT=${OUT:-$(mktemp -d /tmp/keel-payoff.XXXX)}
mkdir -p "$MODELS" "$OUT"
source bench/lib/processes.sh

FIX="$MODELS/fixture-$SHAPE-$TYPE.gguf"
RAND="$MODELS/random-$SHAPE-$TYPE.gguf"
HEAD="$MODELS/fixture-$SHAPE-$TYPE.draft.gguf"
[ -e "$FIX" ] || "$KEEL" make-model --embed "$SMALL" --shape "$SHAPE" --type "$TYPE" -o "$FIX"
[ -e "$RAND" ] || "$KEEL" make-model --shape "$SHAPE" --type "$TYPE" -o "$RAND"
# The draft head: trained once (`keel train-draft`; tens of minutes on 2 cores at this shape);
# NO_HEAD=1 leaves its rows out.
if [ "${NO_HEAD:-0}" != 1 ] && [ ! -e "$HEAD" ]; then
  "$KEEL" train-draft -m "$FIX" -o "$HEAD" -t 2 --tokens 8192 --epochs 8
fi

echo "## honesty: the fixture against the random body ($SHAPE $TYPE)" | tee "$OUT/honesty.md"
for f in "$FIX" "$RAND"; do
  echo "$(basename "$f"): $(stat -L -c %s "$f") bytes" | tee -a "$OUT/honesty.md"
done
for r in 1 2; do
  for f in "$FIX" "$RAND"; do
    tg=$("$KEEL" bench -m "$f" -t 2 -p 0 -n 128 -r 2 2> /dev/null | grep -E "tg128" | tail -1)
    echo "round $r $(basename "$f"): $tg" | tee -a "$OUT/honesty.md"
  done
done

start_llama() {  # LOG ARGS...: llama-server on a free port, like start_keel
  local log=$1
  shift
  port=$(free_port)
  "$LLAMA" "$@" --port "$port" > "$log" 2>&1 &
  SRV=$!
  PIDS+=("$SRV")
  wait_health "$port"
}

row() {  # SERVER NAME C ROUND ARGS...
  local server=$1 name=$2 c=$3 r=$4
  shift 4
  local log="$OUT/$name-c$c-r$r.log"
  if [ "$server" = keel ]; then
    start_keel "$log" serve -m "$FIX" -t 2 --max-num-seqs "$c" --spec-k "$K" "$@"
  else
    start_llama "$log" -m "$FIX" -t 2 -np "$c" -c $((2048 * c)) --spec-draft-n-max "$K" "$@"
  fi
  python3 bench/lib/spec_load.py "$port" "$c" 8 1 > /dev/null  # warm-up
  python3 bench/lib/spec_load.py "$port" "$c" "$TOKENS" 1 | sed "s/^/$server $name $c $r /" \
    >> "$OUT/rows.txt"
  stop "$SRV"
}

keel_rows() {  # C ROUND
  row keel plain "$1" "$2" --speculative none
  row keel ngram "$1" "$2" --speculative ngram
  [ -e "$HEAD" ] && row keel draft-head "$1" "$2" --speculative draft-head --draft-head "$HEAD"
  row keel draft-model "$1" "$2" --draft-model "$SMALL"
}
llama_rows() {  # C ROUND
  row llama plain "$1" "$2"
  row llama ngram-simple "$1" "$2" --spec-type ngram-simple
  row llama draft-model "$1" "$2" -md "$SMALL"
}

: > "$OUT/rows.txt"
for r in $(seq 1 "$ROUNDS"); do
  for c in 1 4; do
    if [ $((r % 2)) = 1 ]; then keel_rows "$c" "$r"; llama_rows "$c" "$r"; else
      llama_rows "$c" "$r"; keel_rows "$c" "$r"; fi
  done
done

python3 - "$OUT" "$SHAPE" "$TYPE" "$TOKENS" "$K" <<'PY'
import collections, json, os, sys
out, shape, typ, tokens, k = sys.argv[1:6]
rows = collections.defaultdict(list)
for line in open(os.path.join(out, "rows.txt")):
    server, name, c, r, js = line.split(" ", 4)
    rows[(server, name, int(c))].append((int(r), json.loads(js)))
print(f"| {shape} {typ} fixture, k = {k}, ≤ {tokens} tokens | c | tok/s per round | "
      "speed-up over the same server's plain (per round) | median decode t/s | text = plain |")
print("|---|---:|---|---|---:|---|")
for (server, name, c), runs in sorted(rows.items(), key=lambda x: (x[0][2], x[0][0], x[0][1] != "plain", x[0][1])):
    plain = dict(rows[(server, "plain", c)])
    tps = " / ".join(f"{j['throughput_tps']:.1f}" for _, j in sorted(runs))
    up = " / ".join(f"{j['throughput_tps'] / plain[r]['throughput_tps']:.2f}×" for r, j in sorted(runs))
    same = all(j["text_sha256"] == plain[r]["text_sha256"] for r, j in runs)
    med = max(j["median_decode_tps"] for _, j in runs)
    print(f"| {server} {name} | {c} | {tps} | {up} | {med:.1f} | {'yes' if same else 'no'} |")
print(f"raw results: {out}")
PY
